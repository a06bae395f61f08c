// The official `openai` npm client against tern-cli serve (run by
// test-openai-node.py, which installs the package and starts the servers).
// Environment: OPENAI_MODULE (the installed package), TERN_URL (a server
// without a key), TERN_KEY_URL and TERN_KEY (a server with one),
// TERN_VISION_URL (a server on a Gemma 3 model named 'gemma' with a vision
// projector) and TERN_IMAGE_URI (a PNG as a data: URI).
//
// The client (openai 5 and later) sends through Node's own fetch (undici),
// which keeps connections alive: most requests, streamed or not, errors
// included, go over a connection an earlier response used, so each response
// must end exactly where it says. Connections and requests are counted per
// server through undici's diagnostics channels to show that they are reused.
'use strict';
const OpenAI = require(process.env.OPENAI_MODULE);

const { check, checkConnectionReuse, expectRejection, runChecks } = require('./client-checks');

function expectError(promise, cls, status, what) {
  return expectRejection(promise, (e) => e instanceof cls && e.status === status,
                         `${cls.name} ${status}`, what);
}

function usageSane(u, maxTokens, what) {
  check(u && u.prompt_tokens > 0 && u.completion_tokens === maxTokens &&
        u.total_tokens === u.prompt_tokens + u.completion_tokens,
        `${what}: usage ${JSON.stringify(u)}`);
}

async function main() {
  const client = new OpenAI({ baseURL: process.env.TERN_URL + '/v1', apiKey: 'unused',
                              maxRetries: 0, timeout: 60000 });
  const models = await client.models.list();
  check(models.data.length === 1 && models.data[0].id === 'tiny',
        'models.list: ' + JSON.stringify(models.data));

  const messages = [{ role: 'system', content: 'You are terse.' },
                    { role: 'user', content: 'Name a colour.' }];
  const chat = await client.chat.completions.create({ model: 'tiny', messages, max_tokens: 8 });
  const text = chat.choices[0].message.content;
  check(chat.object === 'chat.completion' && chat.choices[0].message.role === 'assistant' &&
        typeof text === 'string' && text.length > 0, 'chat: ' + JSON.stringify(chat));
  check(chat.choices[0].finish_reason === 'length', 'chat: finish_reason length');
  usageSane(chat.usage, 8, 'chat');

  const again = await client.chat.completions.create({ model: 'tiny', messages, max_tokens: 8 });
  check(again.choices[0].message.content === text, 'chat: the same greedy answer again');
  check(again.usage.timings && again.usage.timings.restored_tokens > 0,
        'chat: the system prompt restored from the pin the second time');

  const stream = await client.chat.completions.create({
    model: 'tiny', messages, max_tokens: 8, stream: true, stream_options: { include_usage: true } });
  let streamed = '';
  let finish = null;
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    check(chunk.object === 'chat.completion.chunk', 'chat stream: chunk object ' + chunk.object);
    if (chunk.choices.length) {
      streamed += chunk.choices[0].delta.content || '';
      finish = chunk.choices[0].finish_reason || finish;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  check(chunks >= 3, 'chat stream: ' + chunks + ' chunks');
  check(streamed === text, `chat stream: the same text (${JSON.stringify(streamed)} vs ${JSON.stringify(text)})`);
  check(finish === 'length', 'chat stream: finish_reason ' + finish);
  usageSane(usage, 8, 'chat stream');

  const cmpl = await client.completions.create({ model: 'tiny', prompt: 'Once upon a time', max_tokens: 6 });
  const ctext = cmpl.choices[0].text;
  check(cmpl.object === 'text_completion' && typeof ctext === 'string' && ctext.length > 0,
        'completions: ' + JSON.stringify(cmpl));
  usageSane(cmpl.usage, 6, 'completions');

  const cstream = await client.completions.create({
    model: 'tiny', prompt: 'Once upon a time', max_tokens: 6, stream: true,
    stream_options: { include_usage: true } });
  let cstreamed = '';
  let cusage = null;
  for await (const chunk of cstream) {
    if (chunk.choices.length) cstreamed += chunk.choices[0].text;
    if (chunk.usage) cusage = chunk.usage;
  }
  check(cstreamed === ctext, `completions stream: the same text (${JSON.stringify(cstreamed)} vs ${JSON.stringify(ctext)})`);
  usageSane(cusage, 6, 'completions stream');

  const e404 = await expectError(client.chat.completions.create({ model: 'gpt-9', messages }),
                                 OpenAI.NotFoundError, 404, 'unknown model');
  check(e404 && e404.code === 'model_not_found', 'unknown model: code ' + (e404 && e404.code));
  const e400 = await expectError(client.chat.completions.create({ model: 'tiny', messages, n: 2 }),
                                 OpenAI.BadRequestError, 400, 'n = 2');
  check(e400 && e400.param === 'n', 'n = 2: param ' + (e400 && e400.param));
  const long = 'word '.repeat(3000);
  const eover = await expectError(
      client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: long }] }),
      OpenAI.BadRequestError, 400, 'context overflow');
  check(eover && eover.code === 'context_length_exceeded' && /tokens/.test(eover.message),
        'context overflow: ' + (eover && eover.message));

  // An image part, as OpenAI's vision examples send it; tern.image_tokens
  // goes through the client as an extra body member.
  const vision = new OpenAI({ baseURL: process.env.TERN_VISION_URL + '/v1', apiKey: 'unused',
                              maxRetries: 0, timeout: 60000 });
  const imageMessages = [{ role: 'user', content: [
    { type: 'text', text: 'What is in this image?' },
    { type: 'image_url', image_url: { url: process.env.TERN_IMAGE_URI, detail: 'low' } }] }];
  const seen = await vision.chat.completions.create({
    model: 'gemma', messages: imageMessages, max_tokens: 4, tern: { image_tokens: 16 } });
  check(typeof seen.choices[0].message.content === 'string' &&
        seen.usage.timings.image_tokens === 16 && seen.usage.prompt_tokens > 16,
        'image: answered with 16 image tokens: ' + JSON.stringify(seen.usage));
  const seenStream = await vision.chat.completions.create({
    model: 'gemma', messages: imageMessages, max_tokens: 4, tern: { image_tokens: 16 },
    stream: true, stream_options: { include_usage: true } });
  let seenText = '';
  let seenUsage = null;
  for await (const chunk of seenStream) {
    if (chunk.choices.length) seenText += chunk.choices[0].delta.content || '';
    if (chunk.usage) seenUsage = chunk.usage;
  }
  check(seenText === seen.choices[0].message.content && seenUsage &&
        seenUsage.prompt_tokens === seen.usage.prompt_tokens,
        'image stream: the same answer and prompt size');
  const eremote = await expectError(vision.chat.completions.create({
    model: 'gemma', max_tokens: 4, messages: [{ role: 'user', content: [
      { type: 'image_url', image_url: { url: 'https://example.com/cat.png' } }] }] }),
  OpenAI.BadRequestError, 400, 'remote image URL');
  check(eremote && eremote.code === 'invalid_image_url', 'remote image URL: code ' +
        (eremote && eremote.code));
  const enovision = await expectError(client.chat.completions.create({
    model: 'tiny', max_tokens: 4, messages: imageMessages }),
  OpenAI.BadRequestError, 400, 'image for a text model');
  check(enovision && enovision.code === 'model_not_vision',
        'image for a text model: code ' + (enovision && enovision.code));

  const wrongKey = new OpenAI({ baseURL: process.env.TERN_KEY_URL + '/v1', apiKey: 'wrong',
                                maxRetries: 0 });
  await expectError(wrongKey.models.list(), OpenAI.AuthenticationError, 401, 'wrong key');
  const rightKey = new OpenAI({ baseURL: process.env.TERN_KEY_URL + '/v1',
                                apiKey: process.env.TERN_KEY, maxRetries: 0 });
  const keyed = await rightKey.chat.completions.create({ model: 'tiny', messages, max_tokens: 8 });
  check(keyed.choices[0].message.content === text, 'right key: the same answer');

  // Connections were reused, after streamed answers and error responses
  // too. (undici opens a second connection when a request follows the
  // previous response within the same tick, before that connection is back
  // in its pool; hence not exactly one connection per server.)
  checkConnectionReuse(process.env.TERN_URL, 3);
  checkConnectionReuse(process.env.TERN_VISION_URL, 1.5);
}

runChecks(main);
