/**
 * Where packages are kept: files in `$DATA_DIR/blobs` (the embedded default) or objects in an
 * S3-compatible bucket (`S3_BUCKET`), behind one interface that never hands out where the bytes
 * lie except as a file to read for the length of a call. services.ts picks the store.
 */
import { createHash } from 'node:crypto';
import { type Readable, Transform } from 'node:stream';

/** What a receiver that died mid-upload may have left (only the file store leaves anything). */
export interface PartialFile {
  path: string;
  /** Unset for a file of another naming (an older version of the service). */
  uploadId?: string;
  claim?: string;
  modifiedAt: Date;
}

/** What `expected` a stored package is: the size and sha256 it was received with. */
export interface PackageDigest {
  size: number;
  sha256: string;
}

export interface PackageStore {
  /** Says in one line why the store cannot be used as set up (a missing bucket); at start. */
  verify(): Promise<void>;
  /**
   * Keeps `body` as the package of `uploadId` only if `body` ends without an error; when it fails
   * nothing is kept under the package's name, whatever part of it arrived. `claim` names the PUT
   * writing it, so that what a dead one left can be told from what a live one writes.
   */
  writePackage(uploadId: string, claim: string, body: Readable): Promise<void>;
  /**
   * Runs `read` on the stored package as a file on this machine, for as long as `read` runs.
   * Rejects with an error of code `ENOENT` when the package is not there.
   */
  withPackageFile<T>(uploadId: string, read: (path: string) => Promise<T>): Promise<T>;
  /**
   * A stored package, to read from its start; rejects when it is not there. The stream fails at
   * its end, with its last bytes held back, unless what was read is `expected`.
   */
  readPackage(uploadId: string, expected: PackageDigest): Promise<Readable>;
  /** Deletes a stored package (one refused at submit, or never submitted); done if none is there. */
  removePackage(uploadId: string): Promise<void>;
  /** Every partial file a PUT is writing or left behind; none where nothing shows before the end. */
  partials(): Promise<PartialFile[]>;
  discardPartial(file: PartialFile): Promise<void>;
  /** Lets go of connections; the store is not used after. */
  close(): void;
}

/**
 * The store cannot be used as set up (a bucket that does not exist, an endpoint that does not
 * answer): the operator's to fix, said in one line naming the settings (main.ts prints it, exit 2).
 */
export class PackageStoreSetupError extends Error {}

/** An error of code `ENOENT`, as a missing file gives: what callers look for when a package is gone. */
export function packageMissing(message: string): Error {
  return Object.assign(new Error(message), { code: 'ENOENT' });
}

/**
 * Passes bytes on, holding back the last chunk until the whole has been hashed: a package changed
 * since it was checked in ends the stream with an error, short, never complete and wrong.
 */
export function checkedAgainst(expected: PackageDigest, where: string): Transform {
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
            `the stored package ${where} is not the one submitted (${size} bytes, sha256 ${sha256}; expected ${expected.size} bytes, ${expected.sha256}): restore it from a backup`,
          ),
        );
      }
      done(null, held);
    },
  });
}
