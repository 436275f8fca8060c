/**
 * The presigned PUT of `svc publish`: streamed from the packed file, with exactly the headers the
 * service asked for and never an Authorization header (the URL is the credential), reporting
 * progress as bytes go out.
 */
import { open } from 'node:fs/promises';
import { type ClientRequest, request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { CliError } from '../errors.ts';

/**
 * The package goes out from two buffers of this size, filled in turn. A read stream reads into a
 * fresh buffer for every chunk: new pages from the OS each time, handed back only once V8 collects
 * tens of MiB of them. That cost the CLI 10-25 MiB more RSS and three times the CPU during the
 * upload, CPU the service lacks when both share a small machine (see bench/upload.ts).
 */
const chunkBytes = 1024 * 1024;

export interface UploadTarget {
  upload_url: string;
  method: string;
  headers: Record<string, string>;
}

/** Resolves once `chunk` is handed to the socket, after which its buffer may be filled again. */
function written(req: ClientRequest, chunk: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    // A request torn down before its socket took the chunk may never call back.
    const closed = () => reject(new Error('the connection closed during the upload'));
    req.once('close', closed);
    req.write(chunk, (error) => {
      req.off('close', closed);
      if (error) reject(error);
      else resolve();
    });
  });
}

/** Writes the file to `req` and ends it: one buffer is read into while the other goes out. */
async function sendFile(path: string, req: ClientRequest, onProgress: (sent: number) => void): Promise<void> {
  const file = await open(path);
  try {
    const even = Buffer.allocUnsafe(chunkBytes);
    const odd = Buffer.allocUnsafe(chunkBytes);
    let sent = 0;
    let flushed = Promise.resolve();
    for (let turn = 0; ; turn++) {
      const buffer = turn % 2 === 0 ? even : odd;
      // This buffer went out two turns ago; `flushed` is the other one, written last turn.
      const [{ bytesRead }] = await Promise.all([file.read(buffer, 0, buffer.length, null), flushed]);
      if (bytesRead === 0) break;
      flushed = written(req, buffer.subarray(0, bytesRead));
      sent += bytesRead;
      onProgress(sent);
    }
    req.end();
  } catch (error) {
    // Else the half-sent request would hold the process open until the service gave up on it.
    req.destroy(error instanceof Error ? error : new Error(String(error)));
    throw error;
  } finally {
    await file.close();
  }
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
    sendFile(file.path, req, onProgress).catch(reject);
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
