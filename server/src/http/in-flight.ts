/** The requests in flight, so that a stopping service can cut those still running after its grace. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import { answerAndClose } from './errors.ts';
import type { ProblemError } from './problem.ts';

export function inFlightRequests() {
  const exchanges = new Set<{ req: IncomingMessage; res: ServerResponse }>();
  const closedListeners: (() => void)[] = [];

  const track: RequestHandler = (req, res, next) => {
    const exchange = { req, res };
    exchanges.add(exchange);
    res.once('close', () => {
      exchanges.delete(exchange);
      for (const listener of closedListeners) listener();
    });
    next();
  };

  return {
    track,
    get size() {
      return exchanges.size;
    },
    /** Calls `listener` each time a request is over (answered, or its client gone), from now on. */
    onEachClosed(listener: () => void): void {
      closedListeners.push(listener);
    },
    /**
     * Answers every request still in flight with `problem` and closes its connection (an answer
     * already under way is cut); resolves once they have all closed, or after `waitMs`.
     */
    async cutAll(problem: ProblemError, waitMs: number): Promise<void> {
      const closed = [...exchanges].map(({ req, res }) => {
        const done = new Promise<void>((resolve) => res.once('close', () => resolve()));
        answerAndClose(req, res, problem);
        return done;
      });
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, waitMs);
      });
      await Promise.race([Promise.all(closed), late]);
      clearTimeout(timer);
    },
  };
}
