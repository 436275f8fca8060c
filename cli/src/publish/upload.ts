/**
 * The presigned PUT of `svc publish`: streamed from the packed file, with exactly the headers the
 * service asked for and never an Authorization header (the URL is the credential), reporting
 * progress as bytes go out.
 */
import { createReadStream } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { CliError } from '../errors.ts';

export interface UploadTarget {
  upload_url: string;
  method: string;
  headers: Record<string, string>;
}

export async function uploadPackage(
  target: UploadTarget,
  file: { path: string; size: number },
  onProgress: (sent: number) => void,
): Promise<void> {
  const url = new URL(target.upload_url);
  const headers = Object.fromEntries(
    Object.entries(target.headers).filter(([name]) => name.toLowerCase() !== 'authorization'),
  );
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  let sent = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      sent += chunk.length;
      onProgress(sent);
      done(null, chunk);
    },
  });

  const response = new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = send(url, { method: target.method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    pipeline(createReadStream(file.path), counter, req).catch(reject);
  });

  let answer: { status: number; body: string };
  try {
    answer = await response;
  } catch (error) {
    const code = (error as { code?: string }).code;
    throw new CliError(
      `the upload to ${url.origin} failed${code ? ` (${code})` : ''}: try \`svc publish\` again.`,
    );
  }
  if (answer.status < 200 || answer.status >= 300) {
    let detail = `HTTP ${answer.status}`;
    try {
      const problem = JSON.parse(answer.body) as { detail?: string; code?: string };
      if (problem.detail) detail = `${problem.detail} (${problem.code}, HTTP ${answer.status})`;
    } catch {
      // not a problem document: the status says enough
    }
    throw new CliError(`the upload was refused: ${detail}`);
  }
}
