/**
 * The broker ACL table of DESIGN §9, the same checks on the embedded broker and on a Mosquitto of
 * the test's own, managed by the service through dynamic security.
 */
import { serviceUsername } from '../src/mqtt/embedded-broker.ts';
import { aclAdminEmail, describeBrokerAcl } from './support/broker-acl.ts';
import { startTestService } from './support/service.ts';

describeBrokerAcl('the embedded broker', async () => {
  const service = await startTestService({ SVC_ADMIN_EMAILS: aclAdminEmail });
  const { password } = service.app.broker.serviceCredential;
  return {
    service,
    observer: { username: serviceUsername, password, clientId: `${serviceUsername}/acl-observer` },
    stop: () => service.stop(),
  };
});
