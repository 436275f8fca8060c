/**
 * What the broker knows of a credential. The key-value store is the record of every credential;
 * each broker is told of changes its own way: the embedded one reads the store itself (so it only
 * forgets what it cached and drops the clients signed in with the old secret), Mosquitto gets
 * dynamic-security clients and roles.
 */
import type { Brand } from '@svc/sdk';
import type { BrokerRole } from './credentials.ts';

export interface BrokerAccount {
  /** The broker user name: a car's prefixed device id, or `connector:<brand>:<name>`. */
  username: string;
  role: BrokerRole;
  brand: Brand;
  /** A car's device id without its prefix, as its topics carry it. */
  nativeId?: string;
}

export interface BrokerAccounts {
  /**
   * Lets `account` connect with `password` (made, or replacing the one it had), confined to its
   * role's topics; a client still connected with the old password is disconnected.
   */
  put(account: BrokerAccount, password: string): Promise<void>;
  /** The account can no longer connect; a client connected with it is disconnected. */
  remove(username: string): Promise<void>;
  /**
   * The accounts of cars and connectors the broker holds, each with the hash of its password when
   * the broker records it; undefined for a broker that keeps no accounts of its own (the embedded
   * one reads the key-value store).
   */
  list(): Promise<ListedBrokerAccount[] | undefined>;
}

export interface ListedBrokerAccount {
  username: string;
  /** What this service recorded of the password it gave (lowercase hex SHA-256), if anything. */
  secretSha256?: string;
}
