/** Native ids for cars provisioned on the fly: a VIN (ISO 3779, with its check digit), valid for every brand. */
import { randomInt } from 'node:crypto';

/** VINs never use I, O or Q, which read like 1 and 0. */
const vinAlphabet = 'ABCDEFGHJKLMNPRSTUVWXYZ0123456789';

/** ISO 3779 transliteration of letters to digits for the check digit: each letter above the digit it stands for. */
const letters = 'ABCDEFGHJKLMNPRSTUVWXYZ';
const letterDigits = '12345678123457923456789';

const positionWeights = [8, 7, 6, 5, 4, 3, 2, 10, 0, 9, 8, 7, 6, 5, 4, 3, 2];

function transliterate(character: string): number {
  return /\d/.test(character) ? Number(character) : Number(letterDigits[letters.indexOf(character)] ?? 0);
}

/** The 9th character a VIN must have for its other 16. */
export function vinCheckDigit(vin: string): string {
  let sum = 0;
  for (const [index, character] of [...vin].entries())
    sum += transliterate(character) * (positionWeights[index] ?? 0);
  const remainder = sum % 11;
  return remainder === 10 ? 'X' : String(remainder);
}

/** A random 17-character VIN with a correct check digit. */
export function randomVin(): string {
  const characters = Array.from({ length: 17 }, () => vinAlphabet[randomInt(vinAlphabet.length)] as string);
  characters[8] = '0';
  characters[8] = vinCheckDigit(characters.join(''));
  return characters.join('');
}
