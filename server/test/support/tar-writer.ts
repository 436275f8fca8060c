/** Tar archives written block by block, for the hostile packages that the system `tar` will not make. */
import { createWriteStream, statSync } from 'node:fs';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';

export interface TarEntry {
  /** Written as given: no `./`, no stripping; over 100 bytes it goes into a pax record. */
  path: string | Buffer;
  /** The typeflag: `0` file (the default), `1` hard link, `2` symlink, `3` character device,
   * `4` block device, `5` folder, `6` FIFO, or any other byte. */
  type?: string;
  body?: string | Buffer;
  /** The size the header declares; the body's length by default. */
  size?: number;
  linkpath?: string;
  /** Records of a pax header that goes right before this entry. */
  pax?: Record<string, string>;
}

const blockSize = 512;

/** Two zero blocks: the end of an archive. */
export const endOfArchive = Buffer.alloc(2 * blockSize);

/** One ustar header block. */
export function tarHeader(fields: { path: Buffer; type: string; size: number; linkpath?: string }): Buffer {
  const block = Buffer.alloc(blockSize);
  fields.path.copy(block, 0, 0, 100);
  const octal = (value: number, width: number) => `${value.toString(8).padStart(width - 1, '0')}\0`;
  block.write(octal(fields.type === '5' ? 0o755 : 0o644, 8), 100, 'latin1');
  block.write(octal(1000, 8), 108, 'latin1');
  block.write(octal(1000, 8), 116, 'latin1');
  block.write(octal(fields.size, 12), 124, 'latin1');
  block.write(octal(1_700_000_000, 12), 136, 'latin1');
  block.write(fields.type, 156, 'latin1');
  if (fields.linkpath) block.write(fields.linkpath, 157, 100, 'utf8');
  block.write('ustar\u000000', 257, 'latin1');
  block.write('svc', 265, 'latin1');
  block.write('svc', 297, 'latin1');
  // The checksum is taken with its own field read as spaces.
  block.fill(' ', 148, 156);
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
  return block;
}

/** The body of a pax header: `<length> <key>=<value>\n` records, the length counting itself. */
export function paxRecords(records: Record<string, string>): Buffer {
  return Buffer.concat(
    Object.entries(records).map(([key, value]) => {
      const rest = Buffer.byteLength(` ${key}=${value}\n`);
      let length = rest;
      while (length !== rest + String(length).length) length = rest + String(length).length;
      return Buffer.from(`${length} ${key}=${value}\n`);
    }),
  );
}

/** Zero bytes that take a body to the next block boundary. */
export function padding(size: number): Buffer {
  return Buffer.alloc((blockSize - (size % blockSize)) % blockSize);
}

/** An entry's blocks: its pax header when it has one, its header, its body, padded. */
export function tarEntry(entry: TarEntry): Buffer {
  const path = typeof entry.path === 'string' ? Buffer.from(entry.path) : entry.path;
  const body = typeof entry.body === 'string' ? Buffer.from(entry.body) : (entry.body ?? Buffer.alloc(0));
  const pax = { ...(path.length > 100 ? { path: path.toString() } : {}), ...entry.pax };
  const blocks: Buffer[] = [];
  if (Object.keys(pax).length > 0) {
    const records = paxRecords(pax);
    blocks.push(tarHeader({ path: Buffer.from('PaxHeader'), type: 'x', size: records.length }));
    blocks.push(records, padding(records.length));
  }
  blocks.push(
    tarHeader({ path, type: entry.type ?? '0', size: entry.size ?? body.length, linkpath: entry.linkpath }),
    body,
    padding(body.length),
  );
  return Buffer.concat(blocks);
}

/** A whole archive, ended with the two zero blocks unless told otherwise. */
export function tarArchive(entries: TarEntry[], options: { end?: boolean } = {}): Buffer {
  return Buffer.concat([...entries.map(tarEntry), ...(options.end === false ? [] : [endOfArchive])]);
}

/** `bytes` zeros, in chunks of at most 1 MiB that share one buffer, so that none is held whole. */
export function* zeros(bytes: number): Generator<Buffer> {
  const chunk = Buffer.alloc(Math.min(bytes, 1024 * 1024));
  for (let left = bytes; left > 0; left -= chunk.length) {
    yield left >= chunk.length ? chunk : chunk.subarray(0, left);
  }
}

/**
 * Streams `parts` through gzip into `path` and returns the file's size. Level 1 by default: zeros
 * still shrink a couple of hundred times, and a bomb of hundreds of MiB is written in a blink.
 */
export async function writeGzipped(path: string, parts: Iterable<Buffer>, level = 1): Promise<number> {
  await pipeline(Readable.from(parts, { objectMode: false }), createGzip({ level }), createWriteStream(path));
  return statSync(path).size;
}
