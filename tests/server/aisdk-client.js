// Vercel's AI SDK (`ai` with `@ai-sdk/openai-compatible`, the provider it
// documents for OpenAI-compatible local servers) against tern-cli serve; run by
// test-aisdk-node.py, which installs the packages and starts the servers.
// Environment: AISDK_PREFIX (the npm prefix holding node_modules), TERN_URL
// (a Qwen3-vocabulary model named 'qwen3', no key), TERN_KEY_URL and TERN_KEY
// (the same model behind an API key).
//
// What the SDK does differently from the openai client: its own request
// shapes (stream_options from includeUsage, tool definitions, an assistant
// message with tool_calls and null content followed by a tool message), its
// own parsing of usage (cached tokens) and errors (APICallError), and aborts
// through an AbortSignal.
'use strict';
const { createRequire } = require('module');
const path = require('path');

const need = createRequire(path.join(process.env.AISDK_PREFIX, 'node_modules') + path.sep);
const ai = need('ai');
const { createOpenAICompatible } = need('@ai-sdk/openai-compatible');
const { z } = need('zod');

const { check, checkConnectionReuse, expectRejection, runChecks } = require('./client-checks');

function expectCallError(promise, status, what) {
  return expectRejection(promise, (e) => ai.APICallError.isInstance(e) && e.statusCode === status,
                         `APICallError ${status}`, what);
}

function usageSane(u, maxTokens, what) {
  check(u && u.inputTokens > 0 && u.outputTokens === maxTokens &&
        u.totalTokens === u.inputTokens + u.outputTokens,
        `${what}: usage ${JSON.stringify(u)}`);
}

async function main() {
  const tern = createOpenAICompatible({ name: 'tern', baseURL: process.env.TERN_URL + '/v1',
                                        includeUsage: true });
  const model = tern('qwen3');
  const ask = { model, system: 'You are terse.', prompt: 'Name a colour.', maxOutputTokens: 8,
                maxRetries: 0 };

  const first = await ai.generateText(ask);
  check(typeof first.text === 'string' && first.text.length > 0, 'generateText: ' + first.text);
  check(first.finishReason === 'length', 'generateText: finishReason ' + first.finishReason);
  usageSane(first.usage, 8, 'generateText');

  const again = await ai.generateText(ask);
  check(again.text === first.text, 'generateText: the same greedy answer again');
  // The system prompt comes back from the pin: the SDK reads it from
  // usage.prompt_tokens_details.cached_tokens.
  check(again.usage.cachedInputTokens > 0 &&
        again.usage.cachedInputTokens < again.usage.inputTokens,
        'generateText: cached input tokens the second time: ' + JSON.stringify(again.usage));

  const stream = ai.streamText(ask);
  let streamed = '';
  let parts = 0;
  for await (const piece of stream.textStream) {
    streamed += piece;
    parts++;
  }
  check(parts >= 2, 'streamText: ' + parts + ' text parts');
  check(streamed === first.text,
        `streamText: the same text (${JSON.stringify(streamed)} vs ${JSON.stringify(first.text)})`);
  check((await stream.finishReason) === 'length', 'streamText: finishReason length');
  usageSane(await stream.usage, 8, 'streamText');

  // Sampling with a seed is reproducible; the SDK sends seed and temperature.
  const sampled = { ...ask, temperature: 0.9, seed: 1234, maxOutputTokens: 12 };
  const s1 = await ai.generateText(sampled);
  const s2 = await ai.generateText(sampled);
  check(s1.text === s2.text && s1.text.length > 0, 'seeded sampling reproducible');

  // An agent's second request: tool definitions, the assistant's tool call
  // (content null, tool_calls) and the tool's result. The server accepts it
  // and renders the result through the model's template (Qwen3: a
  // <tool_response> block), so the prompt is longer than without it.
  const weather = ai.tool({ description: 'The weather in a city',
                            inputSchema: z.object({ city: z.string() }) });
  const question = { role: 'user', content: 'Weather in Paris?' };
  const call = { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'call_1',
                                                toolName: 'weather', input: { city: 'Paris' } }] };
  const result = { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'call_1',
                                             toolName: 'weather',
                                             output: { type: 'json', value: { celsius: 21 } } }] };
  const plain = await ai.generateText({ model, messages: [question], maxOutputTokens: 4,
                                        maxRetries: 0 });
  const agent = await ai.generateText({ model, messages: [question, call, result],
                                        tools: { weather }, maxOutputTokens: 4, maxRetries: 0 });
  check(agent.finishReason === 'length' && agent.usage.outputTokens === 4,
        'agent conversation answered: ' + JSON.stringify(agent.usage));
  check(agent.usage.inputTokens > plain.usage.inputTokens + 5,
        `agent conversation: the tool result is in the prompt (${agent.usage.inputTokens} vs ` +
        `${plain.usage.inputTokens} input tokens)`);

  // Stopping a stream through its AbortSignal; the server answers the next one.
  const controller = new AbortController();
  const aborted = ai.streamText({ ...ask, maxOutputTokens: 400, abortSignal: controller.signal });
  let abortedText = '';
  try {
    for await (const piece of aborted.textStream) {
      abortedText += piece;
      if (abortedText.length > 0) controller.abort();
    }
  } catch (e) {
    check(e && e.name === 'AbortError', 'abort: ' + (e && e.name));
  }
  const after = await ai.generateText(ask);
  check(after.text === first.text, 'after an aborted stream: the same answer');

  const e404 = await expectCallError(ai.generateText({ ...ask, model: tern('gpt-9') }), 404,
                                     'unknown model');
  check(e404 && /gpt-9/.test(e404.message), 'unknown model: the message names it');
  await expectCallError(ai.generateText({ ...ask, prompt: 'word '.repeat(3000) }), 400,
                        'context overflow');

  const wrong = createOpenAICompatible({ name: 'tern', baseURL: process.env.TERN_KEY_URL + '/v1',
                                         apiKey: 'wrong' });
  await expectCallError(ai.generateText({ ...ask, model: wrong('qwen3') }), 401, 'wrong key');
  const right = createOpenAICompatible({ name: 'tern', baseURL: process.env.TERN_KEY_URL + '/v1',
                                         apiKey: process.env.TERN_KEY });
  const keyed = await ai.generateText({ ...ask, model: right('qwen3') });
  check(keyed.text === first.text, 'right key: the same answer');

  checkConnectionReuse(process.env.TERN_URL, 2);
}

runChecks(main);
