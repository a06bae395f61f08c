/* GGUF reader corruption suite (being written). */
#include "tn-test.h"

int main(void) {
    tn_gguf *g = NULL;
    tn_error err;
    CHECK(tn_gguf_open_memory("XXXX", 4, "bad.gguf", &g, &err) == TN_ERR_FORMAT);
    CHECK(g == NULL);
    return tn_test_finish("gguf-corrupt");
}
