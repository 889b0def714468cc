// Vectors for inbound's Zoom verifier (testdata/zoom-sdk.json): each request is signed as
// Zoom signs it (HMAC-SHA256 hex of "v0:{ts}:{body}") and then accepted by the official
// Zoom SDK's receiver (@zoom/rivet), whose answers to the URL validations are recorded.
// Regenerate: in an empty directory, `npm install @zoom/rivet` and
// `node zoom.js > zoom-sdk.json`.
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const rivet = require('@zoom/rivet/meetings');
const version = JSON.parse(fs.readFileSync(path.join(path.dirname(require.resolve('@zoom/rivet/meetings')), '..', 'package.json'))).version;
console.debug = () => {};
(async () => {
  const secret = 'zoom_inbound_vector_secret_5d3b';
  const ts = Math.floor(Date.now() / 1000);
  // Compact JSON: the SDK verifies JSON.stringify of the parsed body, which equals these bytes.
  const bodies = [
    '{"event":"meeting.started","event_ts":1626230691572,"payload":{"account_id":"AAAAAABBBB","object":{"id":"1234567890","uuid":"czLF6FFFoQOKgAB99DlDb9g==","topic":"Standup"}}}',
    '{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}',
  ];
  const receiver = new rivet.AwsLambdaReceiver({ webhooksSecretToken: secret });
  receiver.init({ eventEmitter: { emit: async () => {} } });
  const handle = receiver.start();
  const cases = [];
  for (const body of bodies) {
    const signature = 'v0=' + crypto.createHmac('sha256', secret).update(`v0:${ts}:${body}`).digest('hex');
    const answer = await handle({ body, headers: { 'x-zm-signature': signature, 'x-zm-request-timestamp': String(ts) } }, {});
    if (answer.statusCode !== 200) throw new Error('the SDK refused the request: ' + answer.body);
    const forged = await handle({ body, headers: { 'x-zm-signature': 'v0=' + '0'.repeat(64), 'x-zm-request-timestamp': String(ts) } }, {});
    if (forged.statusCode === 200) throw new Error('the SDK accepted a forged signature');
    const parsed = JSON.parse(answer.body);
    cases.push({ body, ts, signature, ...(parsed.encryptedToken ? { answer: parsed } : {}) });
  }
  console.log(JSON.stringify({ sdk: '@zoom/rivet ' + version, secret, cases }, null, 2));
})().catch((e) => { console.error(e); process.exit(1); });
