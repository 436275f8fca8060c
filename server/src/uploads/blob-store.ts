/**
 * Package files on disk (`$DATA_DIR/blobs`): written to a temporary file while they stream in,
 * then renamed into place in one step, so a reader never sees half a package.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { join } from 'node:path';

export interface BlobStore {
  /** A fresh temporary path, on the same file system as the packages. */
  temporaryPath(): string;
  packagePath(uploadId: string): string;
  /** Moves a finished temporary file to its package path. */
  keep(temporary: string, uploadId: string): Promise<void>;
  discard(temporary: string): Promise<void>;
}

export function createBlobStore(dataDir: string): BlobStore {
  const incoming = join(dataDir, 'blobs', 'incoming');
  const packages = join(dataDir, 'blobs', 'packages');
  mkdirSync(incoming, { recursive: true });
  mkdirSync(packages, { recursive: true });
  const packagePath = (uploadId: string) => join(packages, `${uploadId}.tar.gz`);
  return {
    temporaryPath: () => join(incoming, `${randomBytes(12).toString('hex')}.part`),
    packagePath,
    keep: (temporary, uploadId) => rename(temporary, packagePath(uploadId)),
    discard: (temporary) => rm(temporary, { force: true }),
  };
}
