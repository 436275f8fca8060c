import { Command, Option } from 'clipanion';
import * as t from 'typanion';
import { BaseCommand } from '../base-command.ts';

/** Not a ServiceCommand: `svc dev` reads no token and never calls the service (DESIGN §11). */
export class DevCommand extends BaseCommand {
  static override paths = [['dev']];

  static override usage = Command.Usage({
    description: 'run a mini-app locally in a simulated car and host: no sign-in, no service',
    details: `
      Serves the app in a host page with a panel for the simulated car (device id, online, ignition, doors, location, locale) on 127.0.0.1, and reloads it on every save. The app's pages get the car's network rules: a \`fetch()\` to an origin its manifest does not list in \`network\` is blocked by the browser and reported here. \`ctx.identityToken()\` gives tokens signed with a key of this machine's own; a backend verifies them against the dev-server's \`/.well-known/jwks.json\`. Only the files \`svc publish\` would pack are served, and the manifest is checked as \`svc publish\` checks it.
    `,
    examples: [
      ['Develop the app in this folder', 'svc dev'],
      [
        'Develop hello-car in a car of brand_b, in German',
        'svc dev examples/hello-car --car brand_b:fleet-7.north --locale de-DE',
      ],
      ['Let the app reach a backend on this machine', 'svc dev --allow-origin http://127.0.0.1:8787'],
    ],
  });

  port = Option.String('--port', '5170', {
    description:
      "The host page's port, the app's the next one up; each the next free one when taken (default 5170)",
    // The app takes a port above the host page's: 65535 leaves it none.
    validator: t.cascade(t.isNumber(), [t.isInteger(), t.isInInclusiveRange(1, 65534)]),
  });
  car = Option.String('--car', { description: "The simulated car's device id (default a brand_a VIN)" });
  locale = Option.String('--locale', { description: "The user's language, a BCP 47 tag (default en-GB)" });
  open = Option.Boolean('--open', false, { description: 'Open the host page in a browser' });
  allowOrigins = Option.Array('--allow-origin', [], {
    description: 'An http(s) origin the app may also reach, for this session only (repeatable)',
  });
  dir = Option.String({ name: 'dir', required: false });

  async execute(): Promise<number> {
    const { runDevServer } = await import('../dev/run-dev.ts');
    return runDevServer(this.context, {
      dir: this.dir ?? '.',
      port: Number(this.port),
      car: this.car,
      locale: this.locale,
      open: this.open,
      allowOrigins: this.allowOrigins,
    });
  }
}
