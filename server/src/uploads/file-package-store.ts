/**
 * Package files on disk (`$DATA_DIR/blobs`): written to a partial file while they stream in, then
 * renamed into place in one step, so a reader never sees half a package. A partial file is named
 * for its upload and for the claim of the PUT writing it, so that whatever a dead receiver left can
 * be told from what a live one is writing (replicas may share the folder).
 */
import { createWriteStream, mkdirSync } from 'node:fs';
import { open, readdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { checkedAgainst, type PackageStore, type PartialFile } from './package-store.ts';

const uuid = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
const partialName = new RegExp(`^(${uuid})\\.(${uuid})\\.part$`);

export function createFilePackageStore(dataDir: string): PackageStore {
  const incoming = join(dataDir, 'blobs', 'incoming');
  const packages = join(dataDir, 'blobs', 'packages');
  mkdirSync(incoming, { recursive: true });
  mkdirSync(packages, { recursive: true });
  const packagePath = (uploadId: string) => join(packages, `${uploadId}.tar.gz`);
  return {
    async verify() {},
    async writePackage(uploadId, claim, body: Readable) {
      // On the same file system as the packages, so that keeping it is a rename.
      const partial = join(incoming, `${uploadId}.${claim}.part`);
      try {
        await pipeline(body, createWriteStream(partial, { flags: 'wx', mode: 0o600 }));
        await rename(partial, packagePath(uploadId));
      } catch (error) {
        // The sweep deletes it should the process die before this does.
        await rm(partial, { force: true });
        throw error;
      }
    },
    withPackageFile: (uploadId, read) => read(packagePath(uploadId)),
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
    discardPartial: (file) => rm(file.path, { force: true }),
    close() {},
  };
}
