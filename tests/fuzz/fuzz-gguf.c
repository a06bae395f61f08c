/* libFuzzer target for the GGUF reader (being written). */
#include "tern.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tn_gguf *g = NULL;
    if (tn_gguf_open_memory(data, size, "fuzz.gguf", &g, NULL) == TN_OK)
        tn_gguf_close(g);
    return 0;
}
