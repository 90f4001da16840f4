/* Used by tests/test_gguf_synth.py: load a GGUF with the pinned libllama, decode a prompt,
 * then N greedy tokens (argmax of the last logits, every logit checked finite), and print
 * {"n_vocab", "prompt_tokens", "generated", "text"} as one JSON line.
 * Weight repacking (extra buffer types) is off, as in the engine's pager runs. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static void on_log(enum ggml_log_level level, const char *text, void *ud) {
    (void)ud;
    if (level >= GGML_LOG_LEVEL_WARN || getenv("SMOKE_VERBOSE")) fputs(text, stderr);
}

static bool no_progress(float p, void *ud) {
    (void)p;
    (void)ud;
    return true;
}

static void json_string(const char *s) {
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') printf("\\%c", *p);
        else if (*p < 0x20) printf("\\u%04x", *p);
        else putchar(*p);
    }
    putchar('"');
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s MODEL.gguf PROMPT N\n", argv[0]);
        return 2;
    }
    const int n_gen = atoi(argv[3]);
    llama_log_set(on_log, NULL);
    llama_backend_init();

    struct llama_model_params mp = llama_model_default_params();
    mp.use_extra_bufts = false;
    mp.progress_callback = no_progress;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "smoke: cannot load %s\n", argv[1]);
        return 1;
    }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    llama_token prompt[512];
    const int n_prompt = llama_tokenize(vocab, argv[2], (int)strlen(argv[2]), prompt, 512, true, false);
    if (n_prompt <= 0) {
        fprintf(stderr, "smoke: tokenize failed (%d)\n", n_prompt);
        return 1;
    }

    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    cp.n_batch = 256;
    cp.n_threads = 2;
    cp.n_threads_batch = 2;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "smoke: cannot create a context\n");
        return 1;
    }

    printf("{\"n_vocab\": %d, \"prompt_tokens\": [", n_vocab);
    for (int i = 0; i < n_prompt; i++) printf("%s%d", i ? ", " : "", prompt[i]);
    printf("], \"generated\": [");

    char text[4096] = "";
    llama_token next = 0;
    struct llama_batch batch = llama_batch_get_one(prompt, n_prompt);
    for (int g = 0; g < n_gen; g++) {
        if (llama_decode(ctx, batch) != 0) {
            fprintf(stderr, "\nsmoke: decode failed\n");
            return 1;
        }
        const float *logits = llama_get_logits_ith(ctx, -1);
        int best = 0;
        for (int v = 0; v < n_vocab; v++) {
            if (!isfinite(logits[v])) {
                fprintf(stderr, "\nsmoke: non-finite logit for token %d\n", v);
                return 1;
            }
            if (logits[v] > logits[best]) best = v;
        }
        printf("%s%d", g ? ", " : "", best);
        char piece[256];
        const int len = llama_token_to_piece(vocab, best, piece, (int)sizeof piece - 1, 0, false);
        if (len > 0 && strlen(text) + (size_t)len < sizeof text) strncat(text, piece, (size_t)len);
        next = best;
        batch = llama_batch_get_one(&next, 1);
    }
    printf("], \"text\": ");
    json_string(text);
    printf("}\n");

    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
