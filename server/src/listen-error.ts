/** Which of the service's listeners could not start, named by the settings that place it. */

/**
 * Which listener: `''` the API, `METRICS` the metrics, `MQTT` the embedded broker, `MQTT_TLS` its
 * TLS listener.
 */
export type Listener = '' | 'METRICS' | 'MQTT' | 'MQTT_TLS';

/**
 * A listener that could not start, with the prefix of the settings that place it: `''` for the
 * API (HOST, PORT), `METRICS` for the metrics (METRICS_HOST, METRICS_PORT), `MQTT` for the
 * embedded broker (HOST, MQTT_PORT).
 */
export class ListenError extends Error {
  override readonly name = 'ListenError';
  readonly code: string | undefined;
  readonly settings: Listener;
  constructor(settings: Listener, cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
    this.settings = settings;
    this.code = (cause as NodeJS.ErrnoException | undefined)?.code;
  }
}
