/**
 * Who may publish and subscribe to what on the broker (DESIGN §9), one table for every broker:
 * the embedded one asks these functions on each publish and subscribe, and Mosquitto gets the
 * same rules as dynamic-security roles.
 *
 * | who                      | may publish                                  | may subscribe          |
 * |--------------------------|----------------------------------------------|------------------------|
 * | car `<brand>:<native>`   | its own `status`, `telemetry`, `presence`, `cmd/ack` | its own `cmd`  |
 * | connector of `<brand>`   | the same, for any car of its brand           | `cmd` of its brand's cars |
 * | the service (bridge)     | `cmd` of any car                             | the other four, of every car |
 *
 * What a client may receive is what the filters it may subscribe match (`mayReceive`): the
 * embedded broker asks it again for each message it forwards, whatever subscription brought it.
 */
import {
  carTopic,
  carTopicFilter,
  parseCarTopic,
  type ServiceReceivedSuffix,
  type ServiceSentSuffix,
  serviceReceives,
  serviceSends,
} from '../../../generated/mqtt.ts';

export type BrokerPrincipal =
  | { role: 'car'; brand: string; nativeId: string }
  | { role: 'connector'; brand: string }
  | { role: 'service' };

const sentByService: ReadonlySet<string> = new Set<ServiceSentSuffix>(serviceSends);
const sentByCars: ReadonlySet<string> = new Set<ServiceReceivedSuffix>(serviceReceives);

export function mayPublish(who: BrokerPrincipal, topic: string): boolean {
  const parsed = parseCarTopic(topic);
  if (!parsed) return false;
  switch (who.role) {
    case 'car':
      return parsed.brand === who.brand && parsed.nativeId === who.nativeId && sentByCars.has(parsed.suffix);
    case 'connector':
      return parsed.brand === who.brand && sentByCars.has(parsed.suffix);
    case 'service':
      return sentByService.has(parsed.suffix);
  }
}

/** `$share/<group>/<filter>`: a shared subscription, split between the subscribers of one group. */
const sharedPrefix = /^\$share\/[^/+#]+\//;

/**
 * Filters are matched exactly against the ones each role needs, never by overlap: a wildcard the
 * table does not list (`cars/#`, `cars/+/+/+`) is refused even where it would match allowed topics.
 */
export function maySubscribe(who: BrokerPrincipal, filter: string): boolean {
  switch (who.role) {
    case 'car':
      return serviceSends.some((suffix) => filter === carTopic(who.brand, who.nativeId, suffix));
    case 'connector': {
      if (serviceSends.some((suffix) => filter === carTopicFilter(suffix, who.brand))) return true;
      const parsed = parseCarTopic(filter);
      return parsed !== undefined && parsed.brand === who.brand && sentByService.has(parsed.suffix);
    }
    case 'service': {
      const unshared = filter.replace(sharedPrefix, '');
      return serviceReceives.some(
        (suffix) => unshared === carTopicFilter(suffix) || matchesBrandFilter(unshared, suffix),
      );
    }
  }
}

/** Whether a message on `topic` may reach `who`: one that a filter `who` may subscribe matches. */
export function mayReceive(who: BrokerPrincipal, topic: string): boolean {
  if (who.role === 'car') {
    return serviceSends.some((suffix) => topic === carTopic(who.brand, who.nativeId, suffix));
  }
  const parsed = parseCarTopic(topic);
  if (!parsed) return false;
  return who.role === 'connector'
    ? parsed.brand === who.brand && sentByService.has(parsed.suffix)
    : sentByCars.has(parsed.suffix);
}

function matchesBrandFilter(filter: string, suffix: ServiceReceivedSuffix): boolean {
  const brand = filter.split('/')[1];
  return (
    brand !== undefined && !/[+#]/.test(brand) && brand !== '' && filter === carTopicFilter(suffix, brand)
  );
}
