/** The ssh-agent client `svc login` signs through (draft-miller-ssh-agent): listing the agent's keys, asking it to sign. */
import { Buffer } from 'node:buffer';
import { createConnection } from 'node:net';
import { fingerprint, type SshSigner, SshWireReader, sshString, uint32, WireFormatError } from '@svc/ssh';
import { CliError } from './errors.ts';

/** Message numbers of draft-miller-ssh-agent §6.1: the only ones svc sends or accepts. */
const agentFailure = 5;
const requestIdentities = 11;
const identitiesAnswer = 12;
const signRequest = 13;
const signResponse = 14;

/**
 * OpenSSH's own bound (AGENT_MAX_LEN): no honest agent answers with more, and a socket that claims
 * more is not allowed to make svc buffer it.
 */
const defaultMaxMessageLength = 256 * 1024;
/** A local agent answers at once; a forwarded one over a dead connection never would. */
const defaultTimeoutMs = 5_000;
/** setTimeout fires at once for anything above this, which would turn a long timeout into none. */
const maxTimeoutMs = 2 ** 31 - 1;

export interface SshAgentOptions {
  /** How long one request may take, connecting included, in milliseconds; 5 s unless told. */
  timeoutMs?: number;
  /** The largest message accepted either way, in bytes after the length prefix; 256 KiB unless told. */
  maxMessageLength?: number;
}

/** A key the agent holds, as it lists it. */
export interface SshAgentKey {
  /** The SSH wire encoding of the public key, as a `.pub` line carries it in base64. */
  publicKeyBlob: Buffer;
  comment: string;
}

/** A key held by the agent: `sign` asks the agent each time, so the private key never leaves it. */
export interface SshAgentSigner extends SshSigner {
  readonly comment: string;
  sign(data: Buffer): Promise<Buffer>;
}

/**
 * Why talking to the agent failed. `unreachable`: nothing answers at the socket path. `refused`:
 * the agent said no (a declined confirmation, a locked agent). The others mean something answers
 * but not as an agent: `timeout`, `closed` (hung up before answering), `too_large`, `malformed`.
 */
export const sshAgentErrorCodes = [
  'unreachable',
  'refused',
  'timeout',
  'closed',
  'too_large',
  'malformed',
] as const;

export type SshAgentErrorCode = (typeof sshAgentErrorCodes)[number];

/** A CliError, so `svc` prints the message alone: each says what went wrong with which agent. */
export class SshAgentError extends CliError {
  // No name of its own: CliError fixes `name` to 'CliError'; `instanceof` and `code` tell them apart.
  readonly code: SshAgentErrorCode;

  constructor(code: SshAgentErrorCode, message: string, cause?: unknown) {
    super(message);
    this.code = code;
    if (cause !== undefined) this.cause = cause;
  }
}

/**
 * The keys the agent at `socketPath` holds, in the agent's order. Rejects with SshAgentError:
 * `unreachable` when nothing listens there, another code when what listens is no working agent.
 */
export async function listAgentKeys(
  socketPath: string,
  options: SshAgentOptions = {},
): Promise<SshAgentKey[]> {
  const answer = await agentRequest(socketPath, Buffer.from([requestIdentities]), options);
  return readAnswer(answer, socketPath, (type, reader) => {
    if (type === agentFailure) {
      throw new SshAgentError('refused', `the ssh-agent at ${socketPath} refused to list its keys`);
    }
    if (type !== identitiesAnswer) return undefined;
    // No cap on the count: each key takes at least 8 bytes, so an inflated count fails once the bytes run out.
    const count = reader.readUint32();
    const keys: SshAgentKey[] = [];
    for (let index = 0; index < count; index += 1) {
      const publicKeyBlob = Buffer.from(reader.readString());
      keys.push({ publicKeyBlob, comment: reader.readString().toString('utf8') });
    }
    return keys;
  });
}

/**
 * A signer for `publicKeyBlob` through the agent at `socketPath` (the value of SSH_AUTH_SOCK), or
 * undefined when there is no agent to ask: no socket path, nothing listening there, or an agent
 * without that key (a locked agent lists none). Something that answers, but not as an agent should,
 * rejects with SshAgentError rather than passing for absent, so the user learns why it was not used.
 */
export async function agentSigner(
  socketPath: string | undefined,
  publicKeyBlob: Buffer,
  options: SshAgentOptions = {},
): Promise<SshAgentSigner | undefined> {
  if (socketPath === undefined || socketPath === '') return undefined;
  let keys: SshAgentKey[];
  try {
    keys = await listAgentKeys(socketPath, options);
  } catch (error) {
    if (error instanceof SshAgentError && error.code === 'unreachable') return undefined;
    throw error;
  }
  const key = keys.find((candidate) => candidate.publicKeyBlob.equals(publicKeyBlob));
  if (key === undefined) return undefined;
  return {
    publicKeyBlob: key.publicKeyBlob,
    comment: key.comment,
    sign: (data) => agentSign(socketPath, key.publicKeyBlob, data, options),
  };
}

/** The signature blob (string type, string signature) of SSH_AGENT_SIGN_RESPONSE, exactly as the agent sent it. */
async function agentSign(
  socketPath: string,
  publicKeyBlob: Buffer,
  data: Buffer,
  options: SshAgentOptions,
): Promise<Buffer> {
  // Flags 0: the only flags defined ask for RSA SHA-2 signatures, which mean nothing to ed25519.
  const request = Buffer.concat([
    Buffer.from([signRequest]),
    sshString(publicKeyBlob),
    sshString(data),
    uint32(0),
  ]);
  const answer = await agentRequest(socketPath, request, options);
  return readAnswer(answer, socketPath, (type, reader) => {
    if (type === agentFailure) {
      throw new SshAgentError(
        'refused',
        `ssh-agent refused to sign with ${fingerprint(publicKeyBlob)}: is the key confirmed/locked? ` +
          'Approve its confirmation prompt, or unlock the agent with ssh-add -X.',
      );
    }
    return type === signResponse ? Buffer.from(reader.readString()) : undefined;
  });
}

/**
 * Reads the message type, hands the rest to `read`, and insists the message ends where `read`
 * stops; `read` answers undefined for a type it does not expect. Anything cut short, running on
 * or of another type becomes SshAgentError `malformed`.
 */
function readAnswer<T>(
  answer: Buffer,
  socketPath: string,
  read: (type: number, reader: SshWireReader) => T | undefined,
): T {
  const reader = new SshWireReader(answer);
  try {
    const type = reader.readByte();
    const value = read(type, reader);
    if (value === undefined) {
      throw new SshAgentError(
        'malformed',
        `the ssh-agent at ${socketPath} answered with an unexpected message (type ${type})`,
      );
    }
    reader.expectEnd();
    return value;
  } catch (error) {
    if (error instanceof WireFormatError) {
      throw new SshAgentError(
        'malformed',
        `the ssh-agent at ${socketPath} answered with a damaged message (${error.message})`,
      );
    }
    throw error;
  }
}

/**
 * Sends one request on a fresh connection and resolves to the body of the first whole message
 * that comes back. One connection per request: nothing stays open between listing and signing,
 * and an answer cannot be taken for the answer to another request. The socket is destroyed
 * however it ends, and the timeout covers the whole exchange, so an agent that trickles bytes
 * cannot hold it open either.
 */
function agentRequest(socketPath: string, body: Buffer, options: SshAgentOptions): Promise<Buffer> {
  const { timeoutMs, maxMessageLength } = resolveOptions(options);
  if (body.length > maxMessageLength) {
    return Promise.reject(
      new RangeError(
        `the ssh-agent request is ${body.length} bytes, over the ${maxMessageLength}-byte limit`,
      ),
    );
  }
  return new Promise((resolve, reject) => {
    const answer = new AnswerReader(socketPath, maxMessageLength);
    let connected = false;
    let settled = false;
    // Every event comes later than this turn, so finish never meets the timer before it exists.
    const socket = createConnection({ path: socketPath });
    const finish = (outcome: () => void): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      outcome();
    };
    const timer = setTimeout(
      () =>
        finish(() =>
          reject(
            new SshAgentError(
              'timeout',
              `the ssh-agent at ${socketPath} did not answer within ${timeoutMs} ms`,
            ),
          ),
        ),
      timeoutMs,
    );
    socket.once('connect', () => {
      connected = true;
      socket.write(Buffer.concat([uint32(body.length), body]));
    });
    socket.on('data', (chunk: Buffer) => {
      let message: Buffer | undefined;
      try {
        message = answer.push(chunk);
      } catch (error) {
        finish(() => reject(error));
        return;
      }
      if (message !== undefined) finish(() => resolve(message));
    });
    socket.on('error', (error) => {
      // Before the connection is made (no such file, not a socket, nobody listening, no permission)
      // there is simply no agent to use; after it, the agent broke off mid-request.
      const failure = connected
        ? new SshAgentError(
            'closed',
            `the connection to the ssh-agent at ${socketPath} failed: ${error.message}`,
            error,
          )
        : new SshAgentError('unreachable', `no ssh-agent answers at ${socketPath}: ${error.message}`, error);
      finish(() => reject(failure));
    });
    socket.on('close', () =>
      finish(() =>
        reject(new SshAgentError('closed', `the ssh-agent at ${socketPath} hung up without answering`)),
      ),
    );
  });
}

/**
 * Gathers chunks into the first message (uint32 length, then that many bytes), however the
 * stream splits or joins them: a length prefix spread over reads, a body over many, a chunk
 * holding that message and more. Buffers at most the announced length, which it caps first.
 */
class AnswerReader {
  readonly #socketPath: string;
  readonly #maxMessageLength: number;
  readonly #chunks: Buffer[] = [];
  #received = 0;
  #messageLength: number | undefined;

  constructor(socketPath: string, maxMessageLength: number) {
    this.#socketPath = socketPath;
    this.#maxMessageLength = maxMessageLength;
  }

  /** The body of the first message once it is whole; bytes after it are left unread. */
  push(chunk: Buffer): Buffer | undefined {
    this.#chunks.push(chunk);
    this.#received += chunk.length;
    if (this.#messageLength === undefined) {
      if (this.#received < 4) return undefined;
      const length = this.#gather().readUInt32BE(0);
      if (length === 0) {
        throw new SshAgentError(
          'malformed',
          `the ssh-agent at ${this.#socketPath} answered with an empty message`,
        );
      }
      if (length > this.#maxMessageLength) {
        throw new SshAgentError(
          'too_large',
          `the ssh-agent at ${this.#socketPath} announced a ${length}-byte message, ` +
            `over the ${this.#maxMessageLength}-byte limit`,
        );
      }
      this.#messageLength = length;
    }
    if (this.#received < 4 + this.#messageLength) return undefined;
    return this.#gather().subarray(4, 4 + this.#messageLength);
  }

  /** Joins what came so far into one buffer; called twice at most per message, so tiny chunks stay cheap. */
  #gather(): Buffer {
    const bytes = this.#chunks.length === 1 ? (this.#chunks[0] as Buffer) : Buffer.concat(this.#chunks);
    this.#chunks.splice(0, this.#chunks.length, bytes);
    return bytes;
  }
}

function resolveOptions(options: SshAgentOptions): Required<SshAgentOptions> {
  const { timeoutMs = defaultTimeoutMs, maxMessageLength = defaultMaxMessageLength } = options;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0 || timeoutMs > maxTimeoutMs) {
    throw new RangeError(`the ssh-agent timeout must be between 1 and ${maxTimeoutMs} ms, not ${timeoutMs}`);
  }
  if (!Number.isSafeInteger(maxMessageLength) || maxMessageLength <= 0) {
    throw new RangeError(
      `the ssh-agent message limit must be a positive whole number, not ${maxMessageLength}`,
    );
  }
  return { timeoutMs, maxMessageLength };
}
