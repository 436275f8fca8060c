/** This tool's version, and how it names itself to the service. */
import packageJson from '../package.json' with { type: 'json' };

export const cliVersion: string = packageJson.version;
export const userAgent = `svc-cli/${cliVersion}`;
