/**
 * Contract validation with express-openapi-validator's request (and, in tests, response) validator,
 * one instance per path of the contract, placed on that path's route behind Express's own match.
 * The rules are the same: requests always validated (no type coercion, unknown query parameters
 * refused), responses in tests.
 *
 * The library's `middleware()` does per request what is the same for every request of a route: it
 * compiled the route's path pattern again to find the operation Express had already matched, and
 * went through five promises (one per stage, security and multipart included, which the contract
 * does not use). So its pieces are put together here once per path: the operation is known where
 * it is bound, and a request meets only the checks themselves.
 *
 * A path's instance is made at its first request, or earlier by `warm`: each one walks the
 * contract's schemas (about 0.1 s), so making all of them before listening held a start at 5 s of
 * compiling before /healthz could answer.
 */

import { setImmediate as nextTurn } from 'node:timers/promises';
import { describeUnstorableText, findUnstorableText, uuidPattern } from '@svc/sdk';
import type { Request, RequestHandler } from 'express';
import { OpenApiSpecLoader } from 'express-openapi-validator/dist/framework/openapi.spec.loader.js';
import type { OpenAPIV3, OpenApiRequest } from 'express-openapi-validator/dist/framework/types.js';
import { RequestValidator, ResponseValidator } from 'express-openapi-validator/dist/middlewares/index.js';
import { SchemaPreprocessor } from 'express-openapi-validator/dist/middlewares/parsers/schema.preprocessor.js';
import { OpenApiValidator } from 'express-openapi-validator/dist/openapi.validator.js';
import { type OperationId, routes } from '../../../generated/routes.ts';
import { withBodyEnvelopes } from './body-envelopes.ts';
import { jsonBody } from './json-body.ts';
import { ProblemError } from './problem.ts';
import { lowerCaseUuids, uuidPlaces } from './uuid-ids.ts';

type Contract = OpenAPIV3.DocumentV3_1;

/** One path's validators, made once: the contract as they read it, and the checks of a request. */
interface PathValidators {
  operations: Record<string, OpenAPIV3.OperationObject>;
  responseOperations: Record<string, OpenAPIV3.OperationObject> | undefined;
  serial: number;
  request: RequestHandler;
  response: RequestHandler | undefined;
}

async function makePathValidators(
  contract: Contract,
  openapiPath: string,
  validateResponses: boolean,
): Promise<PathValidators> {
  const options = new OpenApiValidator({
    apiSpec: contract,
    validateApiSpec: false,
    validateRequests: { allowUnknownQueryParameters: false, coerceTypes: false },
    validateResponses: validateResponses ? { coerceTypes: false } : false,
    validateSecurity: false,
    ignoreUndocumented: false,
    // The service's one UUID grammar in place of ajv-formats' (which takes `urn:uuid:…`).
    formats: { uuid: uuidPattern },
  });
  // What the library's `middleware()` does once, before its first request, for this path alone.
  const spec = await new OpenApiSpecLoader({
    apiDoc: structuredClone({ ...contract, paths: { [openapiPath]: contract.paths?.[openapiPath] ?? {} } }),
    validateApiSpec: false,
    $refParser: options.options.$refParser,
  }).load();
  const { apiDocRes } = new SchemaPreprocessor(
    spec.apiDoc,
    options.ajvOpts.preprocessor,
    // As the library passes it: `false` when responses are not validated, which it reads as such.
    options.options.validateResponses as ConstructorParameters<typeof SchemaPreprocessor>[2],
  ).preProcess();
  const requestValidator = new RequestValidator(spec.apiDoc, options.ajvOpts.request);
  const request: RequestHandler = (req, res, next) => requestValidator.validate(req, res, next);
  const response = validateResponses
    ? (new ResponseValidator(
        apiDocRes,
        options.ajvOpts.response,
        options.options.validateResponses || undefined,
        spec.serial,
      ).validate() as RequestHandler)
    : undefined;
  const operationsOf = (doc: OpenAPIV3.DocumentV3 | OpenAPIV3.DocumentV3_1) =>
    (doc.paths?.[openapiPath] ?? {}) as Record<string, OpenAPIV3.OperationObject>;
  return {
    operations: operationsOf(spec.apiDoc),
    responseOperations: validateResponses ? operationsOf(apiDocRes) : undefined,
    serial: spec.serial,
    request,
    response,
  };
}

/**
 * What the library's metadata stage would have found for the route Express matched: the operation,
 * and the path parameters as Express decoded them.
 */
function describeOperation(
  req: Request,
  validators: PathValidators,
  route: { openapiPath: string; expressPath: string; method: string },
): void {
  const operation = validators.operations[route.method] as OpenAPIV3.OperationObject;
  (req as OpenApiRequest).openapi = {
    expressRoute: route.expressPath,
    openApiRoute: route.openapiPath,
    pathParams: req.params as Record<string, string>,
    schema: operation,
    serial: validators.serial,
    ...(validators.responseOperations
      ? { _responseSchema: validators.responseOperations[route.method] }
      : {}),
  } as OpenApiRequest['openapi'];
}

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
  const validated = withBodyEnvelopes(contract, variantCheckedByService);
  /** Each path's validators once made, and the making of those asked for but not made yet. */
  const made = new Map<string, PathValidators>();
  const making = new Map<string, Promise<PathValidators>>();
  const validatorsOf = (openapiPath: string): Promise<PathValidators> => {
    let pending = making.get(openapiPath);
    if (!pending) {
      pending = makePathValidators(validated, openapiPath, options.validateResponses).then((validators) => {
        made.set(openapiPath, validators);
        return validators;
      });
      making.set(openapiPath, pending);
    }
    return pending;
  };
  const json = jsonBody(options.jsonLimitBytes);
  return {
    forOperation(operationId: OperationId): RequestHandler[] {
      const route = routes[operationId];
      const { openapiPath, method } = route;
      const operation = contract.paths?.[openapiPath]?.[method] as
        | { requestBody?: { content?: object } }
        | undefined;
      const parsers =
        operation?.requestBody?.content && 'application/json' in operation.requestBody.content
          ? [json, refuseUnstorableText]
          : [];
      const check = (validators: PathValidators, ...[req, res, next]: Parameters<RequestHandler>) => {
        describeOperation(req, validators, route);
        if (!validators.response) return validators.request(req, res, next);
        validators.request(req, res, (error?: unknown) =>
          error ? next(error) : (validators.response as RequestHandler)(req, res, next),
        );
      };
      const validate: RequestHandler = (req, res, next) => {
        const ready = made.get(openapiPath);
        if (ready) return check(ready, req, res, next);
        validatorsOf(openapiPath)
          .then((validators) => check(validators, req, res, next))
          .catch(next);
      };
      // Express answers HEAD from the GET route: a HEAD is checked as the GET it stands for.
      const checked = method === 'get' ? checkingHeadAsGet(validate) : validate;
      return [...parsers, checked, ...lowerCaseUuids(uuidPlaces(contract, openapiPath, method))];
    },
    /**
     * Makes the validators of the paths no request has reached yet, one path a turn of the event
     * loop so that requests arriving meanwhile are answered in between. Stops when `stopped` says.
     */
    async warm(stopped: () => boolean = () => false): Promise<void> {
      for (const openapiPath of Object.keys(contract.paths ?? {})) {
        if (stopped()) return;
        await validatorsOf(openapiPath);
        await nextTurn();
      }
    },
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
