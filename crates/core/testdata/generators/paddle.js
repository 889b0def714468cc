// Vectors for inbound's Paddle Billing verifier (testdata/paddle-sdk.json), signed with the
// HMAC of Paddle's official Node SDK and validated by its own WebhooksValidator.
// Regenerate: in an empty directory, `npm install @paddle/paddle-node-sdk` and
// `node paddle.js > paddle-sdk.json`.
const path = require('path');
const fs = require('fs');
const base = path.join(path.dirname(require.resolve('@paddle/paddle-node-sdk')), '..');
const { NodeRuntime, Paddle } = require(path.join(base, 'cjs/index.cjs.node.js'));
// Constructing the SDK's client installs its Node runtime (crypto provider).
new Paddle('pdl_sdbx_apikey_01inboundvectors_unused');
const { RuntimeProvider } = require(path.join(base, 'cjs/internal/providers/runtime-provider.js'));
const { WebhooksValidator } = require(path.join(base, 'cjs/notifications/helpers/webhooks-validator.js'));
const version = JSON.parse(fs.readFileSync(path.join(base, '..', 'package.json'))).version;
(async () => {
  const secret = 'pdl_ntfset_01inboundvector_7c2e1f9a';
  const ts = Math.floor(Date.now() / 1000);
  const bodies = [
    '{"event_id":"evt_01hv8x2acma2jk3nnr0f8cyhyg","event_type":"transaction.completed","occurred_at":"2024-04-12T10:18:49.621022Z","notification_id":"ntf_01hv8x2af2h7y","data":{"id":"txn_01hv8wptq8987qeep44cyrewp9","status":"completed"}}',
    '{"event_id":"evt_2","event_type":"subscription.created","data":{}}',
  ];
  const crypto = RuntimeProvider.getProvider().crypto;
  const validator = new WebhooksValidator();
  const cases = [];
  for (const body of bodies) {
    const h1 = await crypto.computeHmac(`${ts}:${body}`, secret);
    const header = `ts=${ts};h1=${h1}`;
    if (!(await validator.isValidSignature(body, secret, header))) {
      throw new Error('the SDK refused its own signature');
    }
    cases.push({ body, ts, header });
  }
  console.log(JSON.stringify({ sdk: '@paddle/paddle-node-sdk ' + version, secret, cases }, null, 2));
})().catch((e) => { console.error(e); process.exit(1); });
