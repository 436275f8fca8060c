/**
 * Package files on disk (`$DATA_DIR/blobs`): written to a partial file while they stream in, then
 * renamed into place in one step, so a reader never sees half a package. A partial file is named
 * for its upload and for the claim of the PUT writing it, so that whatever a dead receiver left can
 * be told from what a live one is writing (replicas may share the folder).
 */
import { createHash } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { open, readdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { type Readable, Transform } from 'node:stream';

export interface PartialFile {
  path: string;
  /** Unset for a file of another naming (an older version of the service). */
  uploadId?: string;
  claim?: string;
  modifiedAt: Date;
}

export interface BlobStore {
  /** Where one PUT (`claim`) of an upload writes, on the same file system as the packages. */
  partialPath(uploadId: string, claim: string): string;
  packagePath(uploadId: string): string;
  /** Moves a finished partial file to its package path. */
  keep(partial: string, uploadId: string): Promise<void>;
  discard(partial: string): Promise<void>;
  /**
   * A stored package, to read from its start; rejects when it is not there. The stream fails at
   * its end, with its last bytes held back, unless what was read is `expected`.
   */
  readPackage(uploadId: string, expected: { size: number; sha256: string }): Promise<Readable>;
  /** Deletes a stored package (one refused at submit). */
  removePackage(uploadId: string): Promise<void>;
  /** Every partial file in the folder. */
  partials(): Promise<PartialFile[]>;
}

/**
 * Passes bytes on, holding back the last chunk until the whole has been hashed: a file changed on
 * disk since it was checked in ends the stream with an error, short, never complete and wrong.
 */
function checkedAgainst(expected: { size: number; sha256: string }, path: string): Transform {
  const hash = createHash('sha256');
  let held: Buffer | undefined;
  let size = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      size += chunk.length;
      const previous = held;
      held = chunk;
      done(null, previous);
    },
    flush(done) {
      const sha256 = hash.digest('hex');
      if (size !== expected.size || sha256 !== expected.sha256) {
        return done(
          new Error(
            `the stored package ${path} is not the one submitted (${size} bytes, sha256 ${sha256}; expected ${expected.size} bytes, ${expected.sha256}): restore it from a backup`,
          ),
        );
      }
      done(null, held);
    },
  });
}

const uuid = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
const partialName = new RegExp(`^(${uuid})\\.(${uuid})\\.part$`);

export function createBlobStore(dataDir: string): BlobStore {
  const incoming = join(dataDir, 'blobs', 'incoming');
  const packages = join(dataDir, 'blobs', 'packages');
  mkdirSync(incoming, { recursive: true });
  mkdirSync(packages, { recursive: true });
  const packagePath = (uploadId: string) => join(packages, `${uploadId}.tar.gz`);
  return {
    partialPath: (uploadId, claim) => join(incoming, `${uploadId}.${claim}.part`),
    packagePath,
    keep: (partial, uploadId) => rename(partial, packagePath(uploadId)),
    discard: (partial) => rm(partial, { force: true }),
    async readPackage(uploadId, expected) {
      // Opened before the answer starts, so that a missing file is an error, not a short body.
      const file = (await open(packagePath(uploadId))).createReadStream();
      const checked = checkedAgainst(expected, packagePath(uploadId));
      file.on('error', (error) => checked.destroy(error));
      return file.pipe(checked);
    },
    removePackage: (uploadId) => rm(packagePath(uploadId), { force: true }),
    async partials() {
      const names = (await readdir(incoming)).filter((name) => name.endsWith('.part'));
      const found = await Promise.all(
        names.map(async (name): Promise<PartialFile | undefined> => {
          const path = join(incoming, name);
          // Another replica may delete it meanwhile.
          const modifiedAt = await stat(path).then(
            (s) => s.mtime,
            () => undefined,
          );
          if (!modifiedAt) return undefined;
          const [, uploadId, claim] = partialName.exec(name) ?? [];
          return { path, modifiedAt, ...(uploadId && claim ? { uploadId, claim } : {}) };
        }),
      );
      return found.filter((file) => file !== undefined);
    },
  };
}
