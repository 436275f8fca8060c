/** Validators of each car topic's payload, compiled from the AsyncAPI contract as the parser resolves it. */
import { fileURLToPath } from 'node:url';
import { fromFile, Parser } from '@asyncapi/parser';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { type CarTopicSuffix, carTopicSuffixes, parseCarTopic } from '../../../generated/mqtt.ts';

const contractPath = fileURLToPath(new URL('../../../asyncapi/asyncapi.yaml', import.meta.url));

export type PayloadValidators = { readonly [S in CarTopicSuffix]: ValidateFunction };

export async function loadPayloadValidators(): Promise<PayloadValidators> {
  const { document, diagnostics } = await fromFile(new Parser(), contractPath).parse();
  if (!document) throw new Error(`asyncapi/asyncapi.yaml does not parse: ${JSON.stringify(diagnostics)}`);
  // The parser adds `x-parser-*` annotations to every schema: not keywords, so not strict.
  const ajv = new Ajv({ strict: false, allErrors: true });
  addFormats.default(ajv);
  const validators: Partial<Record<CarTopicSuffix, ValidateFunction>> = {};
  for (const channel of document.channels()) {
    const suffix = carTopicSuffixes.find((s) => channel.address()?.endsWith(`}/${s}`));
    const message = channel.messages().all()[0];
    if (!suffix || !message) continue;
    validators[suffix] = ajv.compile(message.payload()?.json() as object);
  }
  for (const suffix of carTopicSuffixes) {
    if (!validators[suffix]) throw new Error(`asyncapi/asyncapi.yaml has no payload for ${suffix}`);
  }
  return validators as PayloadValidators;
}

/** The schema errors of a message on a car topic; an empty list when it is valid. */
export function payloadErrors(validators: PayloadValidators, topic: string, payload: string): string[] {
  const parts = parseCarTopic(topic);
  if (!parts) return [`${topic} is not a car topic`];
  const validate = validators[parts.suffix];
  if (validate(JSON.parse(payload))) return [];
  return (validate.errors ?? []).map((e) => `${topic} ${e.instancePath} ${e.message}`);
}
