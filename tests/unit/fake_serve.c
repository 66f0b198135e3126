/* The HTTP front (serve/http.c, serve/openai.c) in front of the fake engine
 * (fake_engine.c), for the end-to-end test of the OpenAI client
 * (tests/e2e/serve_api.sh). Prints the port it listens on, serves until
 * SIGTERM or SIGINT, then stops the front (running streams end) and exits 0;
 * 1 if a sequence was never released.
 *
 *   fake_serve [--port N] [--host H] [--api-key K] [--max-body BYTES]
 *              [--max-in-flight N] [--delay-ms N] [--model-id ID] [--log] */
#include "fake_engine.h"
#include "serve/http.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    vkv_http_params hp = {0};
    fake_engine_params fp = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--log")) {
            hp.log = true;
            continue;
        }
        if (!strcmp(a, "--strict-model")) {
            hp.strict_model = true;
            continue;
        }
        if (!v) {
            fprintf(stderr, "fake_serve: %s wants a value\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--port")) hp.port = (uint16_t)atoi(v);
        else if (!strcmp(a, "--host")) hp.host = v;
        else if (!strcmp(a, "--api-key")) hp.api_key = v;
        else if (!strcmp(a, "--max-body")) hp.max_body = (size_t)strtoull(v, NULL, 10);
        else if (!strcmp(a, "--max-in-flight")) fp.max_in_flight = (unsigned)atoi(v);
        else if (!strcmp(a, "--delay-ms")) fp.delay_ms = (unsigned)atoi(v);
        else if (!strcmp(a, "--model-id")) fp.model_id = v;
        else if (!strcmp(a, "--alias")) hp.alias = v;
        else {
            fprintf(stderr, "fake_serve: unknown option %s\n", a);
            return 2;
        }
    }
    /* the signals are taken by sigwait below: every thread started after this blocks them */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    vkv_engine *e = fake_engine_create(&fp);
    if (!e) return 1;
    vkv_http_server *srv;
    if (vkv_http_start(&hp, e, &srv)) {
        fprintf(stderr, "fake_serve: %s\n", vkv_last_error());
        vkv_engine_free(e);
        return 1;
    }
    printf("%u\n", (unsigned)vkv_http_port(srv));
    fflush(stdout);
    int sig;
    sigwait(&set, &sig);
    fprintf(stderr, "fake_serve: signal %d: stopping\n", sig);
    vkv_http_stop(srv);
    unsigned live = fake_engine_live(e);
    vkv_engine_free(e);
    if (live) {
        fprintf(stderr, "fake_serve: %u sequences never released\n", live);
        return 1;
    }
    fprintf(stderr, "fake_serve: stopped\n");
    return 0;
}
