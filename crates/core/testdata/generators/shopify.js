// Vectors for inbound's Shopify verifier (testdata/shopify-sdk.json), produced and
// cross-validated by Shopify's official SDK. Regenerate: in an empty directory,
// `npm install @shopify/shopify-api` and `node shopify.js > shopify-sdk.json`.
require('@shopify/shopify-api/adapters/node');
const path = require('path');
const base = path.dirname(require.resolve('@shopify/shopify-api')).replace(/dist\/cjs.*$/, 'dist/cjs');
const utils = require(path.join(base, 'runtime/crypto/utils.js'));
const types = require(path.join(base, 'runtime/crypto/types.js'));
const { shopifyApi, ApiVersion } = require('@shopify/shopify-api');
const fs = require('fs');
const version = JSON.parse(fs.readFileSync(path.join(base, '..', '..', 'package.json'))).version;
(async () => {
  const secret = 'shpss_inbound_vector_secret_0f3a';
  const bodies = [
    '{"id":820982911946154508,"email":"jon@example.com","total_price":"10.00"}',
    '{}',
    '{"note":"caf\u00e9 \u2713","line_items":[]}',
  ];
  const cases = [];
  for (const body of bodies) {
    const hmac = await utils.createSHA256HMAC(secret, body, types.HashFormat.Base64);
    // The SDK's own validation of the same delivery, as a cross-check.
    const shopify = shopifyApi({ apiKey: 'k', apiSecretKey: secret, scopes: [], hostName: 'example.com', apiVersion: ApiVersion.July25, isEmbeddedApp: false, logger: { level: 0, log: () => {} } });
    const headers = {
      'x-shopify-hmac-sha256': hmac, 'x-shopify-topic': 'orders/create', 'x-shopify-shop-domain': 'inbound-test.myshopify.com',
      'x-shopify-api-version': '2025-07', 'x-shopify-webhook-id': 'b54557e4-bdd9-4b37-8a5f-bf7d70bcd043', 'x-shopify-event-id': '98880550-7158-44d4-b7cd-2c97c8a091b5',
    };
    const rawRequest = { method: 'POST', url: '/webhooks', headers };
    const rawResponse = {};
    const result = await shopify.webhooks.validate({ rawBody: body, rawRequest, rawResponse });
    if (!result.valid) throw new Error('the SDK refused its own signature: ' + JSON.stringify(result));
    cases.push({ body, hmac });
  }
  console.log(JSON.stringify({ sdk: '@shopify/shopify-api ' + version, secret, cases }, null, 2));
})().catch((e) => { console.error(e); process.exit(1); });
