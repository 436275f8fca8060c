/** How a simulated car moves: round its route at a varying speed, wearing its odometer and battery. */
import type { Route } from './route.ts';

export interface Fix {
  latitude: number;
  longitude: number;
  headingDeg: number;
  speedKmh: number;
  odometerKm: number;
  batteryPercent: number;
}

export interface DriveOptions {
  route: Route;
  /** Where on the route the car starts, in km from its first waypoint. */
  startKm: number;
  /** The speed the car's speed swings around, in km/h. */
  cruiseKmh: number;
  odometerKm: number;
  batteryPercent: number;
  startedAt: Date;
}

/** A city car uses about 18 kWh per 100 km of a 75 kWh battery: 0.24 % per km. */
const batteryPercentPerKm = 0.24;
/** Below this the car stops at a charger and leaves it full (in the simulator, at once). */
const chargeBelowPercent = 10;
/** Traffic: the speed swings ±30 % around cruise over this period. */
const trafficPeriodMs = 90_000;

const round = (value: number, digits: number) => Number(value.toFixed(digits));

export class Drive {
  private readonly route: Route;
  private readonly cruiseKmh: number;
  private readonly phase: number;
  private alongKm: number;
  private odometerKm: number;
  private batteryPercent: number;
  private at: number;

  constructor(options: DriveOptions) {
    this.route = options.route;
    this.cruiseKmh = options.cruiseKmh;
    this.alongKm = options.startKm;
    this.odometerKm = options.odometerKm;
    this.batteryPercent = options.batteryPercent;
    this.at = options.startedAt.getTime();
    // Each car at its own point of the swing, so that a fleet does not brake in step.
    this.phase = (options.startKm / this.route.lengthKm) * 2 * Math.PI;
  }

  private speedAt(ms: number): number {
    return this.cruiseKmh * (1 + 0.3 * Math.sin(this.phase + (2 * Math.PI * ms) / trafficPeriodMs));
  }

  /** Drives on until `now` and gives the fix there. */
  advance(now: Date): Fix {
    const to = now.getTime();
    const elapsedMs = Math.max(0, to - this.at);
    const speedKmh = this.speedAt(to);
    const km = (speedKmh * elapsedMs) / 3_600_000;
    this.at = Math.max(this.at, to);
    this.alongKm += km;
    this.odometerKm += km;
    this.batteryPercent -= km * batteryPercentPerKm;
    if (this.batteryPercent < chargeBelowPercent) this.batteryPercent = 100;
    const position = this.route.positionAt(this.alongKm);
    return {
      latitude: round(position.latitude, 6),
      longitude: round(position.longitude, 6),
      headingDeg: round(position.headingDeg, 1) % 360,
      speedKmh: round(speedKmh, 1),
      odometerKm: round(this.odometerKm, 3),
      batteryPercent: round(this.batteryPercent, 1),
    };
  }
}
