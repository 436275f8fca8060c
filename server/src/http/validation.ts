/**
 * Contract validation with express-openapi-validator, one instance per path of the contract,
 * placed on that path's route behind Express's own match. One validator over the whole contract
 * would look every request up by compiling each path's pattern in turn (about 17 compilations
 * for /api/v1/dev/me); here it has only its own path to try. The rules are the same: requests
 * always validated (no type coercion, unknown query parameters refused), responses in tests.
 *
 * A path's instance is made at its first request, or earlier by `warm`: each one compiles the
 * OpenAPI meta-schema and walks the contract's schemas (about 0.1 s), so making all of them
 * before listening held a start at 5 s of compiling before /healthz could answer.
 */

import { setImmediate as nextTurn } from 'node:timers/promises';
import { describeUnstorableText, findUnstorableText, uuidPattern } from '@svc/sdk';
import type { RequestHandler } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import type { OpenAPIV3 } from 'express-openapi-validator/dist/framework/types.js';
import { type OperationId, routes } from '../../../generated/routes.ts';
import { withBodyEnvelopes } from './body-envelopes.ts';
import { jsonBody } from './json-body.ts';
import { ProblemError } from './problem.ts';
import { lowerCaseUuids, uuidPlaces } from './uuid-ids.ts';

type Contract = OpenAPIV3.DocumentV3_1;

/**
 * The operations whose JSON body is a union whose variant their service checks itself, so the
 * validator sees only its envelope (body-envelopes.ts): a command's name and arguments are checked
 * by the command service against the car's `cmd` payload, answering 422 `unknown_command` or
 * `invalid_command_args` as the contract's `CommandRequest` says.
 */
const variantCheckedByService: readonly OperationId[] = ['createCarCommand'];

/**
 * `forOperation` gives the middleware before an operation's handler: the JSON body parser where the
 * contract has a JSON request body (not on every GET), then the contract validator of the
 * operation's path. `warm` makes every path's validator ahead of its first request.
 */
export function contractValidators(
  contract: Contract,
  options: { validateResponses: boolean; jsonLimitBytes: number },
) {
  const byPath = new Map<string, RequestHandler[]>();
  const validated = withBodyEnvelopes(contract, variantCheckedByService);
  const validatorsOf = (openapiPath: string): RequestHandler[] => {
    let validators = byPath.get(openapiPath);
    if (!validators) {
      validators = OpenApiValidator.middleware({
        apiSpec: { ...validated, paths: { [openapiPath]: validated.paths?.[openapiPath] ?? {} } } as Contract,
        validateApiSpec: false,
        validateRequests: { allowUnknownQueryParameters: false, coerceTypes: false },
        validateResponses: options.validateResponses ? { coerceTypes: false } : false,
        validateSecurity: false,
        ignoreUndocumented: false,
        // The service's one UUID grammar in place of ajv-formats' (which takes `urn:uuid:…`).
        formats: { uuid: uuidPattern },
      }) as RequestHandler[];
      byPath.set(openapiPath, validators);
    }
    return validators;
  };
  const json = jsonBody(options.jsonLimitBytes);
  return {
    forOperation(operationId: OperationId): RequestHandler[] {
      const { openapiPath, method } = routes[operationId];
      const operation = contract.paths?.[openapiPath]?.[method] as
        | { requestBody?: { content?: object } }
        | undefined;
      const parsers =
        operation?.requestBody?.content && 'application/json' in operation.requestBody.content
          ? [json, refuseUnstorableText]
          : [];
      const validate = inTurn(() => validatorsOf(openapiPath));
      // Express answers HEAD from the GET route: a HEAD is checked as the GET it stands for.
      const check = method === 'get' ? checkingHeadAsGet(validate) : validate;
      return [...parsers, check, ...lowerCaseUuids(uuidPlaces(contract, openapiPath, method))];
    },
    /**
     * Makes the validators of the paths no request has reached yet, one path a turn of the event
     * loop so that requests arriving meanwhile are answered in between. Stops when `stopped` says.
     */
    async warm(stopped: () => boolean = () => false): Promise<void> {
      for (const openapiPath of Object.keys(contract.paths ?? {})) {
        if (stopped()) return;
        validatorsOf(openapiPath);
        await nextTurn();
      }
    },
  };
}

/** Runs `handlers()` one after another as one middleware, passing on the first error. */
function inTurn(handlers: () => RequestHandler[]): RequestHandler {
  return (req, res, next) => {
    const list = handlers();
    let index = 0;
    const step = (error?: unknown) => {
      const handler = list[index++];
      if (error || !handler) return next(error);
      handler(req, res, step);
    };
    step();
  };
}

/**
 * A NUL or an unpaired surrogate anywhere in a JSON body is 422 before any field is looked at: no
 * store can hold either, whatever field it is in (the contract's Text schema says so).
 */
const refuseUnstorableText: RequestHandler = (req, _res, next) => {
  const found = findUnstorableText(req.body, '/body');
  if (found) {
    const message = describeUnstorableText(found);
    throw new ProblemError(422, 'invalid_text', `${found.pointer} ${message}.`, {
      errors: [{ path: found.pointer, message }],
    });
  }
  next();
};

/**
 * The validator knows no HEAD (it would say 405), and skipping it let a HEAD through with a path
 * its GET refuses (a 500 from the store, or a 404 where GET says 400). So a HEAD is shown to the
 * validator as a GET, and is a HEAD again once the validator has passed or refused it.
 */
function checkingHeadAsGet(validator: RequestHandler): RequestHandler {
  return (req, res, next) => {
    if (req.method !== 'HEAD') return validator(req, res, next);
    req.method = 'GET';
    try {
      return validator(req, res, (error?: unknown) => {
        req.method = 'HEAD';
        next(error);
      });
    } catch (error) {
      req.method = 'HEAD';
      throw error;
    }
  };
}
