/**
 * Presigned uploads (DESIGN.md §8): a URL signed for one package (exact size and sha256) that
 * works once, until it expires. The PUT streams into the package store while it is hashed and
 * counted; its last bytes are held back until size, hash and the PUT's hold on the URL are
 * checked, so the store keeps the package only when all three hold. A failed upload leaves
 * nothing behind and the URL can be tried again until it expires. A PUT holds its URL by a lease
 * it renews while bytes flow: one whose receiver died lets the URL go when the lease lapses, and
 * `sweep` deletes what it left.
 */
import { createHash, randomUUID } from 'node:crypto';
import { type Readable, Transform } from 'node:stream';
import type { components } from '../../../generated/openapi.ts';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import {
  ConflictError,
  ForbiddenError,
  InputError,
  InvalidError,
  NotFoundError,
  TooLargeError,
} from '../errors.ts';
import type { Db } from '../store/db.ts';
import type { PackageDigest, PackageStore } from './package-store.ts';
import {
  claimUpload,
  currentClaims,
  deleteAbandonedUploads,
  findUpload,
  insertUpload,
  markRefused,
  markStored,
  markSubmitted,
  releaseLapsedClaims,
  releaseUpload,
  renewLease,
  type UploadRow,
} from './upload-repository.ts';
import {
  parseCanonicalExpires,
  signUpload,
  uploadSigningKey,
  verifyUploadSignature,
} from './upload-signature.ts';

// Services that take uploads (submit) see their rows through this service, never the repository.
export type { UploadRow };

export type UploadUrl = components['schemas']['UploadUrl'];
export type PackageUpload = components['schemas']['PackageUpload'];

export const packageContentType = 'application/gzip';

/**
 * Streams the request body through `count` into `write`. Unlike `pipeline(body, …)` it never
 * destroys the request when `count` refuses (too many bytes): the request's socket is the one
 * the refusal must go out on. A client that goes away fails the transfer instead.
 */
async function receiveInto(
  body: Readable,
  count: Transform,
  write: (counted: Readable) => Promise<void>,
): Promise<void> {
  const gone = () => count.destroy(Object.assign(new Error('aborted'), { code: 'ECONNRESET' }));
  body.once('aborted', gone);
  body.once('error', gone);
  body.once('close', () => {
    if (!body.readableEnded) gone();
  });
  body.pipe(count);
  try {
    await write(count);
  } catch (error) {
    body.unpipe(count);
    // The store may have failed with `count` still open: nothing more goes through it.
    count.destroy();
    // Whatever else the client sends is read and dropped, so the answer can still reach it.
    body.resume();
    throw error;
  }
}

/** A forged, altered or rewritten upload URL: the one answer whatever part of it is wrong. */
export const invalidUploadUrl = () =>
  new ForbiddenError(
    'invalid_upload_url',
    'This upload URL is not valid: ask for a new one (svc publish does).',
  );

export function toApiPackageUpload(row: UploadRow): PackageUpload {
  return {
    upload_id: row.id,
    size: row.size,
    sha256: row.sha256,
    received_at: (row.stored_at ?? row.created_at).toISOString(),
  };
}

export interface UploadService {
  createUploadUrl(
    accountId: string,
    input: { size: number; sha256: string; app_id: string; version: string },
  ): Promise<UploadUrl>;
  /** Receives the PUT body; the URL's query carries `expires` and `signature`. */
  receive(
    uploadId: string,
    query: { expires: string; signature: string },
    body: Readable,
    declaredLength: string | undefined,
  ): Promise<UploadRow>;
  /** The upload `uploadId` of `accountId`, stored and never submitted: what submit may take. */
  submittable(accountId: string, uploadId: string): Promise<UploadRow>;
  /**
   * Runs `check` on the upload's stored package, as a file for as long as `check` runs. An upload
   * the sweep deleted meanwhile is not found; other errors (the package refused) pass through.
   */
  checkStored<T>(upload: UploadRow, check: (path: string, size: number) => Promise<T>): Promise<T>;
  /**
   * Marks the upload submitted `at`, within the submit's transaction `trx`; refused when another
   * submit took it first, or the sweep deleted it.
   */
  markSubmitted(trx: Db, uploadId: string, at: Date): Promise<void>;
  /** Marks the upload refused at submit and deletes its package, of no further use. */
  refuse(uploadId: string): Promise<void>;
  /** The package of a submitted upload (a version's), to read; it fails short if not `expected`. */
  openPackage(uploadId: string, expected: PackageDigest): Promise<Readable>;
  /**
   * Lets go of the uploads whose receivers stopped renewing their lease (they died), and deletes
   * the partial files that no live PUT is writing.
   */
  sweep(): Promise<void>;
  /** Resolves once every PUT under way has ended, its clean-up included. */
  settled(): Promise<void>;
}

/**
 * Another PUT holds the URL. When the hold is known, the asker is told until when it lasts (the
 * holder's lease, renewed while its bytes flow; a receiver that died lets it lapse then).
 */
const heldElsewhere = (hold?: { now: Date; until: Date | null | undefined }) => {
  const until = hold?.until;
  if (!hold || !until)
    return new ConflictError('upload_in_progress', 'Another upload to this URL is in progress.');
  const seconds = Math.max(1, Math.ceil((until.getTime() - hold.now.getTime()) / 1000));
  return new ConflictError(
    'upload_in_progress',
    `Another upload to this URL is in progress: the URL is held until ${until.toISOString()} (${seconds} s from now), longer while that upload's bytes keep arriving. If that upload was cut off, try again then.`,
    { retryAfterSeconds: seconds },
  );
};

const submittedAlready = () => new ConflictError('upload_submitted', 'This upload was submitted already.');

/** An upload never submitted is deleted some time after its URL expired (the upload sweep). */
const swept = () =>
  new NotFoundError(
    'upload_not_found',
    'This upload was deleted, unsubmitted, after its URL expired: publish again.',
  );

export function createUploadService(deps: {
  db: Db;
  config: Config;
  clock: Clock;
  packages: PackageStore;
  /** The service's public base URL, which upload URLs start with. */
  baseUrl: () => string;
}): UploadService {
  const { db, config, clock, packages } = deps;
  let signingKey: Promise<Buffer> | undefined;
  const key = () => {
    // A failed first read is not kept: the next request tries again.
    signingKey ??= uploadSigningKey(db, clock).catch((error: unknown) => {
      signingKey = undefined;
      throw error;
    });
    return signingKey;
  };

  const leaseMs = config.uploadLeaseSeconds * 1000;
  /** The PUTs under way, each settling once it has ended and cleaned up. */
  const receptions = new Set<Promise<void>>();

  return {
    async createUploadUrl(accountId, { size, sha256, app_id, version }) {
      if (size > config.maxPackageBytes) {
        throw new TooLargeError(
          'package_too_large',
          `The package is ${size} bytes; this service takes packages of at most ${config.maxPackageBytes} bytes.`,
        );
      }
      const now = clock();
      // Whole seconds: the expiry travels in the URL as seconds since the epoch.
      const expires = Math.floor(now.getTime() / 1000) + config.uploadUrlTtlSeconds;
      const upload: UploadRow = {
        id: randomUUID(),
        account_id: accountId,
        size,
        sha256,
        created_at: now,
        expires_at: new Date(expires * 1000),
        receiving_since: null,
        receiving_claim: null,
        lease_expires_at: null,
        stored_at: null,
        submitted_at: null,
        app_id,
        version,
        refused_at: null,
      };
      await insertUpload(db, upload);
      const signature = signUpload(await key(), { uploadId: upload.id, size, sha256, expires });
      return {
        upload_id: upload.id,
        upload_url: `${deps.baseUrl()}/uploads/${upload.id}?expires=${expires}&signature=${signature}`,
        method: 'PUT',
        headers: { 'content-type': packageContentType, 'content-length': String(size) },
        expires_at: upload.expires_at.toISOString(),
      };
    },

    async receive(uploadId, query, body, declaredLength) {
      const upload = await findUpload(db, uploadId);
      // Only the spelling the service wrote: `expires=0…` names the same second but is not that URL.
      const expires = parseCanonicalExpires(query.expires);
      const signed =
        upload !== undefined &&
        expires !== undefined &&
        Math.floor(upload.expires_at.getTime() / 1000) === expires &&
        verifyUploadSignature(
          await key(),
          { uploadId, size: upload.size, sha256: upload.sha256, expires },
          query.signature,
        );
      if (!upload || !signed) throw invalidUploadUrl();
      const now = clock();
      if (upload.expires_at.getTime() <= now.getTime()) {
        throw new ForbiddenError('upload_url_expired', 'This upload URL has expired: ask for a new one.');
      }
      if (upload.stored_at) {
        throw new ConflictError('upload_used', 'This upload URL was used already: ask for a new one.');
      }
      if (declaredLength !== undefined) {
        const length = Number(declaredLength);
        if (length > upload.size) {
          throw new TooLargeError(
            'wrong_length',
            `This URL takes exactly ${upload.size} bytes, not ${length}.`,
          );
        }
        if (length < upload.size) {
          throw new InputError('wrong_length', `This URL takes exactly ${upload.size} bytes, not ${length}.`);
        }
      }
      const claim = randomUUID();
      const claimed = await claimUpload(db, uploadId, {
        claim,
        at: now,
        leaseExpiresAt: new Date(now.getTime() + leaseMs),
      });
      if (!claimed) throw heldElsewhere({ now, until: (await findUpload(db, uploadId))?.lease_expires_at });
      const reception = receiveClaimed(upload, claim, body);
      const ended = reception.then(
        () => undefined,
        () => undefined,
      );
      receptions.add(ended);
      void ended.then(() => receptions.delete(ended));
      return reception;
    },

    async submittable(accountId, uploadId) {
      const upload = await findUpload(db, uploadId);
      if (!upload || upload.account_id !== accountId) {
        throw new NotFoundError(
          'upload_not_found',
          `No upload ${uploadId} of yours exists: upload the package first.`,
        );
      }
      if (!upload.stored_at) {
        throw new ConflictError('upload_not_received', 'The package has not been uploaded to its URL yet.');
      }
      if (upload.submitted_at) throw submittedAlready();
      if (upload.refused_at) {
        throw new ConflictError(
          'upload_refused',
          'This package was refused when it was submitted, and deleted: fix it and publish again.',
        );
      }
      return upload;
    },

    async checkStored(upload, check) {
      try {
        return await packages.withPackageFile(upload.id, (path) => check(path, upload.size));
      } catch (error) {
        // The sweep deleted it between the look-up and the check.
        if ((error as NodeJS.ErrnoException).code === 'ENOENT' && !(await findUpload(db, upload.id)))
          throw swept();
        throw error;
      }
    },

    async markSubmitted(trx, uploadId, at) {
      if (await markSubmitted(trx, uploadId, at)) return;
      if (await findUpload(trx, uploadId)) throw submittedAlready();
      throw swept();
    },

    async refuse(uploadId) {
      await markRefused(db, uploadId, clock());
      await packages.removePackage(uploadId);
    },

    openPackage: (uploadId, expected) => packages.readPackage(uploadId, expected),

    async sweep() {
      const now = clock();
      await releaseLapsedClaims(db, now);
      // Uploads never submitted are deleted one URL lifetime after their URL expired, which leaves
      // a late submit its time; their partial files go below, with every other file no claim holds.
      const cutoff = new Date(now.getTime() - config.uploadUrlTtlSeconds * 1000);
      for (let gone = await deleteAbandonedUploads(db, cutoff, now); gone.length > 0; ) {
        await Promise.all(gone.map((id) => packages.removePackage(id)));
        gone = await deleteAbandonedUploads(db, cutoff, now);
      }
      const files = await packages.partials();
      const ids = [...new Set(files.flatMap((file) => (file.uploadId ? [file.uploadId] : [])))];
      const claims = await currentClaims(db, ids);
      // A file of another naming is no one's once no PUT could still be writing it: a PUT
      // lasts at most as long as its URL lives. (File times are the real time, not the clock's.)
      const unnamedBefore = Date.now() - config.uploadUrlTtlSeconds * 1000;
      const abandoned = files.filter((file) =>
        file.uploadId ? claims.get(file.uploadId) !== file.claim : file.modifiedAt.getTime() < unnamedBefore,
      );
      await Promise.all(abandoned.map((file) => packages.discardPartial(file)));
    },

    async settled() {
      await Promise.all(receptions);
    },
  };

  /**
   * Streams the body of a claimed upload into the package store. Size, sha256 and this PUT's hold
   * on the URL are checked before the stream ends, so that a wrong body fails it and the store
   * keeps nothing. The last bytes wait for those checks too: a store that sends a body of known
   * length on (one PutObject) would have it kept the moment the last byte left.
   */
  async function receiveClaimed(upload: UploadRow, claim: string, body: Readable): Promise<UploadRow> {
    const uploadId = upload.id;
    let received = 0;
    let renewedAt = 0;
    const hash = createHash('sha256');
    let held: Buffer | undefined;
    const count = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        received += chunk.length;
        if (received > upload.size) {
          done(
            new TooLargeError('wrong_length', `This URL takes exactly ${upload.size} bytes, and more came.`),
          );
          return;
        }
        hash.update(chunk);
        const previous = held;
        held = chunk;
        done(null, previous);
      },
      flush(done) {
        if (received < upload.size) {
          done(
            new InputError('wrong_length', `This URL takes exactly ${upload.size} bytes; ${received} came.`),
          );
          return;
        }
        const sha256 = hash.digest('hex');
        if (sha256 !== upload.sha256) {
          done(
            new InvalidError(
              'sha256_mismatch',
              `The package's sha256 is ${sha256}, not the ${upload.sha256} the URL was made for.`,
            ),
          );
          return;
        }
        // A PUT that lost the URL (its lease lapsed and another took it) keeps nothing.
        renewLease(db, uploadId, claim, new Date(clock().getTime() + leaseMs)).then(
          (stillHeld) => (stillHeld ? done(null, held) : done(heldElsewhere())),
          (error: Error) => done(error),
        );
      },
    });
    // Why the body failed, as the PUT's answer: a store may report it as its own failure.
    let refusal: unknown;
    count.once('error', (error) => {
      refusal ??= error;
    });
    // The lease is renewed while bytes flow; a stalled PUT lets it lapse, and may be taken over.
    const renewal = setInterval(() => {
      if (received === renewedAt) return;
      renewedAt = received;
      renewLease(db, uploadId, claim, new Date(clock().getTime() + leaseMs)).then(
        (stillHeld) => {
          if (!stillHeld) count.destroy(heldElsewhere());
        },
        // The store did not answer: the next renewal tries again, and the claim is checked
        // again before the package is kept.
        () => undefined,
      );
    }, leaseMs / 3);
    try {
      // What dead claims on this upload left is no one's now that this PUT holds it.
      const leftovers = (await packages.partials()).filter(
        (file) => file.uploadId === uploadId && file.claim !== claim,
      );
      await Promise.all(leftovers.map((file) => packages.discardPartial(file)));
      await receiveInto(body, count, (counted) => packages.writePackage(uploadId, claim, counted));
      const storedAt = clock();
      // Lost in the instant since the renewal: the package in place has the same bytes anyway.
      if (!(await markStored(db, uploadId, claim, storedAt))) throw heldElsewhere();
      return {
        ...upload,
        stored_at: storedAt,
        receiving_since: null,
        receiving_claim: null,
        lease_expires_at: null,
      };
    } catch (error) {
      // The store has kept nothing (and deleted what it could): the URL works again at once.
      await releaseUpload(db, uploadId, claim);
      throw refusal ?? error;
    } finally {
      clearInterval(renewal);
    }
  }
}
