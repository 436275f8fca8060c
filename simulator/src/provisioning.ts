/** Cars provisioned on the fly: new VINs, registered through the admin API, each with its broker credential. */
import { type Brand, createApiClient, isProblem, validateDeviceId } from '@svc/sdk';
import type { CarCredential } from './car.ts';
import { SimulatorError } from './errors.ts';
import { randomVin } from './native-id.ts';

export interface ProvisionOptions {
  apiUrl: string;
  /** An admin's access token. */
  token: string;
  count: number;
  brand: Brand;
  fetch?: typeof globalThis.fetch;
  /**
   * Requests at once; default 8. A broker that does each provisioning's work one at a time
   * (Mosquitto's dynamic security writes its file after every change) gains nothing from more, and
   * each one waiting longer risks the service's 503 for a broker slow to answer.
   */
  concurrency?: number;
}

/** Stays under the service's rate limits while not making a large fleet wait long. */
const concurrentRequests = 8;

function describeRefusal(status: number, body: unknown, apiUrl: string): string {
  const detail = isProblem(body) ? `${body.detail ?? body.title} (${body.code})` : `HTTP ${status}`;
  if (status === 401)
    return `the service at ${apiUrl} refused the token: ${detail}; sign in again and pass a fresh --token`;
  if (status === 403) return `provisioning cars needs an admin's token: ${detail}`;
  return `the service at ${apiUrl} refused to provision a car: ${detail}`;
}

export async function provisionCars(options: ProvisionOptions): Promise<CarCredential[]> {
  const api = createApiClient({
    baseUrl: options.apiUrl,
    token: options.token,
    userAgent: 'svc-car-sim',
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
  const credentials: CarCredential[] = [];
  let failure: SimulatorError | undefined;

  async function provisionOne(): Promise<void> {
    // A fresh VIN: the deviceId's validation is the same one the service runs.
    const deviceId = `${options.brand}:${randomVin()}`;
    validateDeviceId(deviceId, { brand: options.brand });
    const answer = await api
      .POST('/api/v1/admin/cars', { body: { device_id: deviceId, brand: options.brand } })
      .catch((error: unknown) => {
        // fetch says only "fetch failed"; the reason (ECONNREFUSED, ENOTFOUND…) is its cause.
        const { cause } = error as { cause?: { code?: string; message?: string } };
        const reason = cause?.code ?? cause?.message ?? (error as Error).message;
        throw new SimulatorError(
          `cannot reach the service at ${options.apiUrl} (${reason}): is it running, and is --api-url right?`,
        );
      });
    if (!answer.data)
      throw new SimulatorError(describeRefusal(answer.response.status, answer.error, options.apiUrl));
    credentials.push({ deviceId: answer.data.car.device_id, password: answer.data.mqtt.password });
  }

  let remaining = options.count;
  async function lane(): Promise<void> {
    while (failure === undefined && remaining > 0) {
      remaining -= 1;
      try {
        await provisionOne();
      } catch (error) {
        if (!(error instanceof SimulatorError)) throw error;
        failure ??= error;
      }
    }
  }
  await Promise.all(
    Array.from(
      { length: Math.min(options.concurrency ?? concurrentRequests, Math.max(1, options.count)) },
      lane,
    ),
  );
  if (failure) throw failure;
  return credentials;
}
