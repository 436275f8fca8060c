/** The loop the simulated cars drive: waypoints in WGS 84, and where a car is after so many km. */

export interface Waypoint {
  latitude: number;
  longitude: number;
}

export interface RoutePosition extends Waypoint {
  /** Degrees clockwise from true north, toward the next waypoint. */
  headingDeg: number;
}

/** A ring around the centre of Munich (the city of the contract's examples), about 11 km long. */
export const munichRing: readonly Waypoint[] = [
  { latitude: 48.1371, longitude: 11.5754 },
  { latitude: 48.1446, longitude: 11.5581 },
  { latitude: 48.1553, longitude: 11.5616 },
  { latitude: 48.1626, longitude: 11.5862 },
  { latitude: 48.1508, longitude: 11.6033 },
  { latitude: 48.1351, longitude: 11.5995 },
  { latitude: 48.1245, longitude: 11.5801 },
];

const earthRadiusKm = 6371.0088;
const radians = (degrees: number) => (degrees * Math.PI) / 180;
const degrees = (radiansValue: number) => (radiansValue * 180) / Math.PI;

/** Great-circle distance between two points, in km (haversine). */
export function distanceKm(from: Waypoint, to: Waypoint): number {
  const dLat = radians(to.latitude - from.latitude);
  const dLon = radians(to.longitude - from.longitude);
  const a =
    Math.sin(dLat / 2) ** 2 +
    Math.cos(radians(from.latitude)) * Math.cos(radians(to.latitude)) * Math.sin(dLon / 2) ** 2;
  return 2 * earthRadiusKm * Math.asin(Math.min(1, Math.sqrt(a)));
}

/** Initial bearing from one point to the next, in [0, 360). */
export function bearingDeg(from: Waypoint, to: Waypoint): number {
  const dLon = radians(to.longitude - from.longitude);
  const y = Math.sin(dLon) * Math.cos(radians(to.latitude));
  const x =
    Math.cos(radians(from.latitude)) * Math.sin(radians(to.latitude)) -
    Math.sin(radians(from.latitude)) * Math.cos(radians(to.latitude)) * Math.cos(dLon);
  return (degrees(Math.atan2(y, x)) + 360) % 360;
}

export class Route {
  readonly lengthKm: number;
  private readonly legs: { from: Waypoint; to: Waypoint; startKm: number; km: number; headingDeg: number }[];

  constructor(waypoints: readonly Waypoint[] = munichRing) {
    if (waypoints.length < 2) throw new Error('a route needs at least two waypoints');
    let startKm = 0;
    this.legs = waypoints.map((from, index) => {
      const to = waypoints[(index + 1) % waypoints.length] as Waypoint;
      const km = distanceKm(from, to);
      const leg = { from, to, startKm, km, headingDeg: bearingDeg(from, to) };
      startKm += km;
      return leg;
    });
    this.lengthKm = startKm;
  }

  /** Where a car is after driving `km` from the first waypoint, going round the loop as often as needed. */
  positionAt(km: number): RoutePosition {
    const along = ((km % this.lengthKm) + this.lengthKm) % this.lengthKm;
    const leg =
      this.legs.find((l) => along < l.startKm + l.km) ?? (this.legs.at(-1) as (typeof this.legs)[number]);
    // Legs are at most 2 km: between their ends a straight line in degrees is metres from the great circle.
    const share = leg.km === 0 ? 0 : (along - leg.startKm) / leg.km;
    return {
      latitude: leg.from.latitude + (leg.to.latitude - leg.from.latitude) * share,
      longitude: leg.from.longitude + (leg.to.longitude - leg.from.longitude) * share,
      headingDeg: leg.headingDeg,
    };
  }
}
