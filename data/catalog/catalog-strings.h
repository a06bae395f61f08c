/* Generated from data/catalog/models.json by data/catalog/gen-catalog-strings.py:
 * do not edit. After changing the catalog's words, run
 *   python3 data/catalog/gen-catalog-strings.py data/catalog/models.json data/catalog/catalog-strings.h
 * and translate the new entries (docs/TRANSLATING.md). Only xgettext reads
 * this file: the app and tern-cli look the words up when they show them. */

static const char *const tern_catalog_strings[] = {
  /* Translators: the description of the model family qwen3 (models.json); keep names, sizes and licence names as they are */
  N_("Alibaba's Qwen3: thinking on or off, Apache-2.0."),
  /* Translators: the description of the model qwen3:0.6b (models.json); keep names, sizes, tags and licence names as they are */
  N_("The smallest Qwen3, 0.6B parameters at Q8_0: quick short answers on any computer, thinking on or off."),
  /* Translators: the description of the model qwen3:0.6b-flash (models.json); keep names, sizes, tags and licence names as they are */
  N_("Flash: the system prompt is pinned once and every question starts from it (single-turn); uses the same files as qwen3:0.6b."),
  /* Translators: the description of the model qwen3:1.7b (models.json); keep names, sizes, tags and licence names as they are */
  N_("Qwen3 with 1.7B parameters: better answers than 0.6B, still quick on a laptop; Qwen3 0.6B drafts for speculation."),
  /* Translators: the description of the model qwen3:1.7b-flash (models.json); keep names, sizes, tags and licence names as they are */
  N_("Flash: the system prompt is pinned once and every question starts from it (single-turn); uses the same files as qwen3:1.7b."),
  /* Translators: the description of the model qwen3:4b (models.json); keep names, sizes, tags and licence names as they are */
  N_("Qwen3 with 4B parameters: a middle ground between speed and quality for everyday chat and reasoning; Qwen3 0.6B drafts for speculation."),
  /* Translators: the description of the model qwen3:4b-flash (models.json); keep names, sizes, tags and licence names as they are */
  N_("Flash: the system prompt is pinned once and every question starts from it (single-turn); uses the same files as qwen3:4b."),
  /* Translators: the description of the model qwen3:8b (models.json); keep names, sizes, tags and licence names as they are */
  N_("Qwen3 with 8B parameters, the largest dense Qwen3 here: for harder questions; Qwen3 0.6B drafts for speculation."),
  /* Translators: the description of the model qwen3:8b-flash (models.json); keep names, sizes, tags and licence names as they are */
  N_("Flash: the system prompt is pinned once and every question starts from it (single-turn); uses the same files as qwen3:8b."),
  /* Translators: the description of the model qwen3:30b-a3b (models.json); keep names, sizes, tags and licence names as they are */
  N_("Mixture of experts: 30B parameters, 3B active per token; Qwen3 0.6B as its draft. About 17 GB."),
  /* Translators: the description of the model qwen3:30b-a3b-flash (models.json); keep names, sizes, tags and licence names as they are */
  N_("Flash: the system prompt is pinned once and every question starts from it (single-turn); uses the same files as qwen3:30b-a3b."),
  /* Translators: the description of the model family gemma3 (models.json); keep names, sizes and licence names as they are */
  N_("Google's Gemma 3 instruction-tuned models (Gemma Terms of Use)."),
  /* Translators: the description of the model gemma3:1b (models.json); keep names, sizes, tags and licence names as they are */
  N_("Gemma 3 with 1B parameters, text only: quick short answers and summaries on any computer."),
  /* Translators: the description of the model gemma3:1b-flash (models.json); keep names, sizes, tags and licence names as they are */
  N_("Flash: the system prompt is pinned once and every question starts from it (single-turn); uses the same files as gemma3:1b."),
  /* Translators: the name of the model gemma3:4b (models.json); translate only the words after the model's name */
  N_("Gemma 3 4B (vision)"),
  /* Translators: the description of the model gemma3:4b (models.json); keep names, sizes, tags and licence names as they are */
  N_("Gemma 3 with 4B parameters and its vision projector: reads images and answers about them; 128K context."),
  /* Translators: the description of the model gemma3:4b-flash (models.json); keep names, sizes, tags and licence names as they are */
  N_("Flash: the system prompt is pinned once and every question starts from it (single-turn); uses the same files as gemma3:4b, without the vision projector."),
  /* Translators: the description of the model family gemma4 (models.json); keep names, sizes and licence names as they are */
  N_("Google's Gemma 4 instruction-tuned models: E2B, E4B, the 26B-A4B mixture and the dense 31B (Apache 2.0, with Google's Gemma 4 licence page and prohibited-use policy: ai.google.dev/gemma/docs/gemma_4_license)."),
  /* Translators: the name of the model gemma4:e2b (models.json); translate only the words after the model's name */
  N_("Gemma 4 E2B (vision)"),
  /* Translators: the description of the model gemma4:e2b (models.json); keep names, sizes, tags and licence names as they are */
  N_("Google's quantization-aware Q4_0 of Gemma 4 E2B with its vision projector: reads images; thinking on request."),
  /* Translators: the description of the model gemma4:e2b-flash (models.json); keep names, sizes, tags and licence names as they are */
  N_("Flash: the system prompt is pinned once and every question starts from it (single-turn); uses the same files as gemma4:e2b, without the vision projector."),
  /* Translators: the name of the model gemma4:e2b-mtp-flash (models.json); translate only the words after the model's name */
  N_("Gemma 4 E2B flash, MTP speculation"),
  /* Translators: the description of the model gemma4:e2b-mtp-flash (models.json); keep names, sizes, tags and licence names as they are */
  N_("Flash: the system prompt is pinned once and every question starts from it (single-turn); speculates with the MTP assistant head (about 60 MB) on the files of gemma4:e2b; output is the same as without it, only faster."),
  /* Translators: the name of the model gemma4:e4b (models.json); translate only the words after the model's name */
  N_("Gemma 4 E4B (vision)"),
  /* Translators: the description of the model gemma4:e4b (models.json); keep names, sizes, tags and licence names as they are */
  N_("Google's quantization-aware Q4_0 of Gemma 4 E4B with its vision projector: reads images; thinking on request."),
  /* Translators: the description of the model gemma4:e4b-flash (models.json); keep names, sizes, tags and licence names as they are */
  N_("Flash: the system prompt is pinned once and every question starts from it (single-turn); uses the same files as gemma4:e4b, without the vision projector."),
  /* Translators: the name of the model gemma4:e4b-mtp-flash (models.json); translate only the words after the model's name */
  N_("Gemma 4 E4B flash, MTP speculation"),
  /* Translators: the description of the model gemma4:e4b-mtp-flash (models.json); keep names, sizes, tags and licence names as they are */
  N_("Flash: the system prompt is pinned once and every question starts from it (single-turn); speculates with the MTP assistant head (about 60 MB) on the files of gemma4:e4b; output is the same as without it, only faster."),
  /* Translators: the name of the model gemma4:26b-a4b (models.json); translate only the words after the model's name */
  N_("Gemma 4 26B-A4B (vision)"),
  /* Translators: the description of the model gemma4:26b-a4b (models.json); keep names, sizes, tags and licence names as they are */
  N_("Mixture of experts: 26B parameters, 4B active per token; Google's quantization-aware Q4_0 with its vision projector."),
  /* Translators: the description of the model gemma4:26b-a4b-flash (models.json); keep names, sizes, tags and licence names as they are */
  N_("Flash: the system prompt is pinned once and every question starts from it (single-turn); uses the same files as gemma4:26b-a4b, without the vision projector."),
  /* Translators: the name of the model gemma4:26b-a4b-dflash-flash (models.json); translate only the words after the model's name */
  N_("Gemma 4 26B-A4B flash, DFlash speculation"),
  /* Translators: the description of the model gemma4:26b-a4b-dflash-flash (models.json); keep names, sizes, tags and licence names as they are */
  N_("Flash: the system prompt is pinned once and every question starts from it (single-turn); speculates with z-lab's DFlash block draft (472 MB, ggml-org's conversion) on the files of gemma4:26b-a4b; output is the same as without it, only faster where the draft guesses well."),
  /* Translators: the name of the model gemma4:31b (models.json); translate only the words after the model's name */
  N_("Gemma 4 31B (vision)"),
  /* Translators: the description of the model gemma4:31b (models.json); keep names, sizes, tags and licence names as they are */
  N_("The largest dense Gemma 4: Google's quantization-aware Q4_0 (17.7 GB) with its vision projector. Wants 24 GB of memory, and every token reads all of its weights, so it is slow on a laptop CPU; thinking on request."),
  /* Translators: the description of the model gemma4:31b-flash (models.json); keep names, sizes, tags and licence names as they are */
  N_("Flash: the system prompt is pinned once and every question starts from it (single-turn); uses the same files as gemma4:31b, without the vision projector."),
  /* Translators: the description of the model family llama3.2 (models.json); keep names, sizes and licence names as they are */
  N_("Meta's Llama 3.2 instruct models (Llama 3.2 Community License)."),
  /* Translators: the description of the model llama3.2:1b (models.json); keep names, sizes, tags and licence names as they are */
  N_("Llama 3.2 with 1B parameters: quick, with a long context (128K) for long texts, on any computer."),
  /* Translators: the description of the model llama3.2:3b (models.json); keep names, sizes, tags and licence names as they are */
  N_("Llama 3.2 with 3B parameters: everyday chat with a long context (128K); Llama 3.2 1B drafts for speculation."),
  /* Translators: the description of the model llama3.2:3b-flash (models.json); keep names, sizes, tags and licence names as they are */
  N_("Flash: the system prompt is pinned once and every question starts from it (single-turn); uses the same files as llama3.2:3b."),
  /* Translators: the description of the model family llama3.1 (models.json); keep names, sizes and licence names as they are */
  N_("Meta's Llama 3.1 instruct models (Llama 3.1 Community License)."),
  /* Translators: the description of the model llama3.1:8b (models.json); keep names, sizes, tags and licence names as they are */
  N_("Llama 3.1 with 8B parameters, the largest Llama here: for harder questions, 128K context; Llama 3.2 1B (same vocabulary) drafts for speculation."),
  /* Translators: the description of the model llama3.1:8b-flash (models.json); keep names, sizes, tags and licence names as they are */
  N_("Flash: the system prompt is pinned once and every question starts from it (single-turn); uses the same files as llama3.1:8b."),
  /* Translators: the description of the model family gpt-oss (models.json); keep names, sizes and licence names as they are */
  N_("OpenAI's open-weight gpt-oss models: mixture of experts, harmony chat format (Apache 2.0)."),
  /* Translators: the description of the model gpt-oss:20b (models.json); keep names, sizes, tags and licence names as they are */
  N_("Mixture of experts: 21B parameters, 3.6B active per token, MXFP4 experts; reasons before it answers. About 12 GB."),
  /* Translators: the description of the model gpt-oss:20b-flash (models.json); keep names, sizes, tags and licence names as they are */
  N_("Flash: the system prompt is pinned once and every question starts from it (single-turn); uses the same files as gpt-oss:20b."),
};
