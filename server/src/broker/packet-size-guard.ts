/**
 * A bound on the MQTT packets a client may send the embedded broker, kept on the raw connection
 * before aedes reads it. mqtt-packet buffers a whole packet before it parses it, and a fixed
 * header may announce up to 256 MB, before the client has signed in: without the bound, a few
 * connections could fill the service's memory. The guard reads each fixed header as the bytes go
 * by (a type byte, then the "remaining length": 1 to 4 bytes of 7 bits, least significant first)
 * and ends the connection as soon as one announces more than the bound.
 */
import type { Socket } from 'node:net';
import { Duplex } from 'node:stream';

/**
 * The largest packet a client may send: a status report with a long list of installed apps is a
 * few kilobytes, a fix a few hundred bytes. The same bound is the operator's `max_packet_size` on
 * Mosquitto (docs/operating.md, "The broker"), and the bridge's on payloads.
 */
export const maxPacketBytes = 64 * 1024;

export type PacketRefusal = 'packet_too_large' | 'malformed_packet';

export interface RefusedPacket {
  reason: PacketRefusal;
  /** What the packet announced, fixed header included, as far as it was read. */
  announcedBytes?: number;
}

/** Follows the packets in a stream of bytes by their fixed headers, without keeping any. */
export class PacketSizeReader {
  private stage: 'type' | 'length' | 'body' = 'type';
  private length = 0;
  private lengthBytes = 0;
  private bodyLeft = 0;
  private readonly limit: number;
  constructor(limit: number) {
    this.limit = limit;
  }

  /** Reads the next bytes of the stream; a refusal once a packet announces too much. */
  read(chunk: Uint8Array): RefusedPacket | undefined {
    let at = 0;
    while (at < chunk.length) {
      if (this.stage === 'body') {
        const taken = Math.min(this.bodyLeft, chunk.length - at);
        this.bodyLeft -= taken;
        at += taken;
        if (this.bodyLeft === 0) this.stage = 'type';
        continue;
      }
      const byte = chunk[at++] as number;
      if (this.stage === 'type') {
        this.stage = 'length';
        this.length = 0;
        this.lengthBytes = 0;
        continue;
      }
      this.length += (byte & 0x7f) * 128 ** this.lengthBytes;
      this.lengthBytes += 1;
      const announcedBytes = 1 + this.lengthBytes + this.length;
      // Refused as soon as the bytes read so far say too much, before the last length byte.
      if (announcedBytes > this.limit) return { reason: 'packet_too_large', announcedBytes };
      if (byte & 0x80) {
        if (this.lengthBytes === 4) return { reason: 'malformed_packet' };
        continue;
      }
      this.bodyLeft = this.length;
      this.stage = this.length > 0 ? 'body' : 'type';
    }
    return undefined;
  }
}

/**
 * The connection as aedes should see it (aedes takes any Duplex): bytes pass through unchanged,
 * until a packet announces more than `limit`; then `refused` is told and the connection ends.
 */
export function guardPacketSize(
  socket: Socket,
  limit: number,
  refused: (refusal: RefusedPacket) => void,
): Duplex {
  const reader = new PacketSizeReader(limit);
  const guarded = new Duplex({
    read() {
      socket.resume();
    },
    write(chunk, encoding, callback) {
      socket.write(chunk, encoding, callback);
    },
    // mqtt-packet writes a packet in pieces (header, topic, payload) between cork and uncork: they
    // reach the socket as one write, one system call, rather than one each, in turn.
    writev(chunks, callback) {
      socket.write(Buffer.concat(chunks.map(({ chunk }) => chunk as Buffer)), callback);
    },
    final(callback) {
      socket.end(callback);
    },
    destroy(error, callback) {
      socket.destroy();
      callback(error);
    },
  });
  socket.on('data', (chunk: Buffer) => {
    const refusal = reader.read(chunk);
    if (refusal) {
      socket.pause();
      refused(refusal);
      guarded.destroy();
      return;
    }
    if (!guarded.push(chunk)) socket.pause();
  });
  socket.on('end', () => guarded.push(null));
  socket.on('error', (error) => guarded.destroy(error));
  socket.on('close', () => guarded.destroy());
  return guarded;
}
