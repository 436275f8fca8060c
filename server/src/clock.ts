/** The time, injectable so tests can move it (challenge expiry, token lifetime, rate limits). */
export type Clock = () => Date;

export const systemClock: Clock = () => new Date();
