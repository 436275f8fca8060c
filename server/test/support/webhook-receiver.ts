/**
 * A webhook receiver on 127.0.0.1, as an integrator would run one: it keeps every request (its
 * headers and raw body) and answers as the test says (a status, or never).
 */
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  /** The event's `type` from the body. */
  type: string;
  /** The `webhook-id` header: the event's id. */
  id: string;
  /** The status the receiver answered, or undefined when it never did. */
  answered?: number;
}

/** How to answer a request: a status and body, or `'hang'` to never answer. */
export type Answer = { status: number; body?: string } | 'hang';

export interface WebhookReceiver {
  url: string;
  received: Received[];
  /** Decides each answer; by default 200. */
  answer: (request: Received, sameIdBefore: number) => Answer;
  /** The requests answered 2xx. */
  delivered(): Received[];
  close(): Promise<void>;
}

export async function startWebhookReceiver(path = '/hooks'): Promise<WebhookReceiver> {
  const hanging = new Set<ServerResponse>();
  const receiver: WebhookReceiver = {
    url: '',
    received: [],
    answer: () => ({ status: 200, body: 'ok' }),
    delivered: () => receiver.received.filter((r) => r.answered !== undefined && r.answered < 300),
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let type = '';
      try {
        type = String(JSON.parse(body).type);
      } catch {}
      const request: Received = { headers: req.headers, body, type, id: String(req.headers['webhook-id']) };
      const sameIdBefore = receiver.received.filter((r) => r.id === request.id).length;
      receiver.received.push(request);
      const answer = receiver.answer(request, sameIdBefore);
      if (answer === 'hang') {
        hanging.add(res);
        return;
      }
      request.answered = answer.status;
      res.writeHead(answer.status, { 'content-type': 'text/plain' });
      res.end(answer.body ?? '');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`;
  return receiver;
}
