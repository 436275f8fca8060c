/** Who is calling: the account behind a valid access token, and what minted that token. */
export type TokenSource = 'ssh_key' | 'web_session';

export interface Principal {
  accountId: string;
  email: string;
  name: string;
  createdAt: Date;
  isAdmin: boolean;
  token: {
    id: string;
    source: TokenSource;
    sshKeyId: string | null;
    keyFingerprint: string | null;
    expiresAt: Date;
  };
}
