/** The SSH wire encoding (RFC 4251 uint32, string, byte): writer helpers and a bounds-checked reader. */
import { Buffer } from 'node:buffer';

export function uint32(value: number): Buffer {
  const bytes = Buffer.alloc(4);
  bytes.writeUInt32BE(value);
  return bytes;
}

/** A length-prefixed string; text is written as UTF-8. */
export function sshString(value: string | Uint8Array): Buffer {
  const bytes = typeof value === 'string' ? Buffer.from(value, 'utf8') : value;
  return Buffer.concat([uint32(bytes.length), bytes]);
}

/**
 * Raised by SshWireReader when bytes end early or run long; each caller turns it into its own
 * refusal. Messages are clauses ("it ends early") because the ssh-agent client shows them in
 * brackets after naming the damaged message.
 */
export class WireFormatError extends Error {
  override readonly name = 'WireFormatError';
}

/** A cursor over SSH wire encoding; every read is bounds-checked, so untrusted bytes cannot overrun. */
export class SshWireReader {
  readonly #bytes: Buffer;
  #offset = 0;

  constructor(bytes: Buffer) {
    this.#bytes = bytes;
  }

  get remaining(): number {
    return this.#bytes.length - this.#offset;
  }

  readBytes(length: number): Buffer {
    if (length > this.remaining) throw new WireFormatError('it ends early');
    const bytes = this.#bytes.subarray(this.#offset, this.#offset + length);
    this.#offset += length;
    return bytes;
  }

  readByte(): number {
    return this.readBytes(1).readUInt8(0);
  }

  readUint32(): number {
    return this.readBytes(4).readUInt32BE(0);
  }

  readString(): Buffer {
    return this.readBytes(this.readUint32());
  }

  /** Refuses trailing bytes: a field added after the ones read would otherwise pass unseen. */
  expectEnd(): void {
    if (this.remaining !== 0) throw new WireFormatError('it runs on past its end');
  }
}
