/** The manifest's fields, in the contract's order, and the one a mistyped name most likely meant. */
import contract from '../../generated/openapi.json' with { type: 'json' };

/** The Manifest schema's fields, in its order: the order messages list them in. */
export const manifestFields: readonly string[] = Object.keys(contract.components.schemas.Manifest.properties);

/** The field `name` is a slip of (at most two edits away, case aside), or undefined. */
export function closestManifestField(name: string): string | undefined {
  let best: string | undefined;
  let bestDistance = 3;
  for (const field of manifestFields) {
    const distance = editDistance(name.toLowerCase(), field);
    if (distance < bestDistance) {
      best = field;
      bestDistance = distance;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, substitution));
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}
