/** What every command runs with: the clipanion context plus the user's home, so tests can give their own. */
import type { BaseContext } from 'clipanion';

export interface SvcContext extends BaseContext {
  home: string;
}

export const defaultApiUrl = 'http://127.0.0.1:8080';
