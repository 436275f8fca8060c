/**
 * The presigned upload URL is the PUT's credential, so it is looked at first, as a bearer token is
 * on other routes: each signed parameter once, in the one spelling the service writes. Any other
 * spelling (`expires=0…`, a signature whose unused bits differ, a parameter twice) is the 403 of a
 * forged URL, not the contract validator's 400; the upload service then checks the signature.
 */
import type { RequestHandler } from 'express';
import { invalidUploadUrl } from '../uploads/upload-service.ts';
import { isCanonicalSignature, parseCanonicalExpires } from '../uploads/upload-signature.ts';

export const requireIssuedUploadUrl: RequestHandler = (req, _res, next) => {
  const at = req.originalUrl.indexOf('?');
  const query = new URLSearchParams(at < 0 ? '' : req.originalUrl.slice(at + 1));
  const [expires, ...moreExpires] = query.getAll('expires');
  const [signature, ...moreSignatures] = query.getAll('signature');
  const asIssued =
    expires !== undefined &&
    signature !== undefined &&
    moreExpires.length === 0 &&
    moreSignatures.length === 0 &&
    parseCanonicalExpires(expires) !== undefined &&
    isCanonicalSignature(signature);
  if (!asIssued) throw invalidUploadUrl();
  next();
};
