/**
 * Publishing: upload URL, the presigned PUT, submit, my apps, review moves, the review queue and
 * a version's package.
 */
import { toApiVersion } from '../../mini-apps/mini-app-service.ts';
import { toApiPackageLimits } from '../../mini-apps/package-check.ts';
import type { Services } from '../../services.ts';
import { toApiPackageUpload } from '../../uploads/upload-service.ts';
import type { Handlers } from '../bind-handlers.ts';

export function miniAppHandlers({ uploads, miniApps, config }: Services) {
  return {
    getPackageLimits: () => ({ status: 200, body: toApiPackageLimits(config.maxPackageBytes) }),

    createUploadUrl: async ({ body }, { principal }) => ({
      status: 201,
      body: await miniApps.requestUpload(principal, body),
    }),

    uploadPackage: async ({ params, query }, { req }) => {
      const upload = await uploads.receive(params.upload_id, query, req, req.get('content-length'));
      return { status: 201, body: toApiPackageUpload(upload) };
    },

    submitMiniApp: async ({ body }, { principal }) => ({
      status: 201,
      body: toApiVersion(await miniApps.submit(principal, body.upload_id)),
    }),

    listMyMiniApps: async (_request, { principal }) => ({
      status: 200,
      body: { mini_apps: await miniApps.listMine(principal) },
    }),

    transitionMiniAppVersion: async ({ params, body }, { principal }) => ({
      status: 200,
      body: toApiVersion(
        await miniApps.transition(principal, params.version_id, body.to, body.reason, body.rollout),
      ),
    }),

    downloadMiniAppPackage: async ({ params }, { principal }) => {
      const { version, content } = await miniApps.openPackage(principal, params.version_id);
      return {
        status: 200,
        body: content,
        headers: {
          'Content-Type': 'application/gzip',
          'Content-Length': String(version.package_size),
          // App ids and versions hold no quote, slash or space: the name needs no escaping.
          'Content-Disposition': `attachment; filename="${version.app_id}-${version.version}.tgz"`,
          'Cache-Control': 'private, no-store',
        },
      };
    },

    listReviewQueue: async (_request, { principal }) => {
      const { waiting, published } = await miniApps.reviewQueue(principal);
      return {
        status: 200,
        body: { versions: waiting.map(toApiVersion), published: published.map(toApiVersion) },
      };
    },
  } satisfies Partial<Handlers>;
}
