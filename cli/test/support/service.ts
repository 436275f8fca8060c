/** The real svc service for CLI tests, started as `npm start` runs it (see the server's test support). */
export {
  type ServiceProcess as RunningService,
  startServiceProcess,
} from '../../../server/test/support/service-process.ts';
