/** What every command runs with: the clipanion context plus the user's home, so tests can give their own. */
import type { BaseContext } from 'clipanion';

export interface SvcContext extends BaseContext {
  home: string;
  /**
   * `false` keeps the token in the file under `home` only. For runs inside a test process, which
   * would otherwise share the developer's own credential store; the binary always tries it.
   */
  keyring?: boolean;
}

export const defaultApiUrl = 'http://127.0.0.1:8080';
