/**
 * Which cars an app is for: the brands its manifest lists, every brand when it lists none. The
 * service refuses to install it on, or sign its tokens for, a car of another brand; `svc dev`
 * warns when its car is one.
 */
import { brands as allBrands, type Brand } from '../../generated/brands.ts';
import type { Manifest } from './schema.ts';

/** The brands the app runs on, in the manifest's order; every brand when it names none. */
export function supportedBrands(manifest: Pick<Manifest, 'brands'>): readonly Brand[] {
  return manifest.brands ?? allBrands;
}

export function supportsBrand(manifest: Pick<Manifest, 'brands'>, brand: string): boolean {
  return (supportedBrands(manifest) as readonly string[]).includes(brand);
}
