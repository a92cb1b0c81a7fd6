/* gradcomm-store: the membership server of fault-tolerant jobs
 * (docs/fault-tolerance.md), in a process of its own so that it outlives every
 * rank. Start it once per job (or once for several jobs: they are kept apart by
 * their job key) and give the ranks its address in GRADCOMM_STORE. It runs until
 * SIGINT or SIGTERM. Uses only the public C API. */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gradcomm/gradcomm.h>

static void usage(FILE* out) {
  fputs(
      "Usage: gradcomm-store [--host HOST] [--port PORT] [--port-file FILE] [--quiet]\n"
      "The membership server of fault-tolerant gradcomm jobs: members join it, agree\n"
      "on each generation of the live set and vote on every step through it.\n"
      "Prints 'gradcomm-store listening on HOST:PORT'; give the ranks that address\n"
      "in GRADCOMM_STORE. Runs until SIGINT or SIGTERM.\n"
      "  -H, --host HOST       address family and name to print (default 0.0.0.0:\n"
      "                        every IPv4 interface; '::' for IPv6 too)\n"
      "  -p, --port PORT       the port to listen on (default 29400; 0: any free one)\n"
      "  -f, --port-file FILE  also write the port to FILE (for scripts using port 0)\n"
      "  -q, --quiet           log warnings only (default: every membership change)\n"
      "  -h, --help            this text\n",
      out);
}

int main(int argc, char** argv) {
  static const struct option options[] = {{"host", required_argument, NULL, 'H'},
                                          {"port", required_argument, NULL, 'p'},
                                          {"port-file", required_argument, NULL, 'f'},
                                          {"quiet", no_argument, NULL, 'q'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  const char* host = "0.0.0.0";
  const char* port_file = NULL;
  long port = 29400;
  int quiet = 0, c;
  char* end;
  sigset_t stop_signals;
  int signal_number = 0, bound = 0;
  gcommStoreServer_t server;
  gcommLogConfig_t log = GCOMM_LOG_CONFIG_INITIALIZER;

  while ((c = getopt_long(argc, argv, "H:p:f:qh", options, NULL)) != -1) {
    switch (c) {
      case 'H':
        host = optarg;
        break;
      case 'p':
        port = strtol(optarg, &end, 10);
        if (*optarg == '\0' || *end != '\0' || port < 0 || port > 65535) {
          fprintf(stderr, "gradcomm-store: --port %s is not 0..65535\n", optarg);
          return 2;
        }
        break;
      case 'f':
        port_file = optarg;
        break;
      case 'q':
        quiet = 1;
        break;
      case 'h':
        usage(stdout);
        return 0;
      default:
        usage(stderr);
        return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "gradcomm-store: unexpected argument '%s'\n", argv[optind]);
    usage(stderr);
    return 2;
  }
  if (getenv("GRADCOMM_DEBUG") == NULL) {
    log.level = quiet ? gcommLogWarn : gcommLogInfo;
    gcommSetLogConfig(&log);
  }
  /* The signals are waited for, not handled: blocked before any thread starts. */
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
  if (gcommStoreServerStart(host, (int)port, &server) != gcommSuccess ||
      gcommStoreServerPort(server, &bound) != gcommSuccess) {
    fprintf(stderr, "gradcomm-store: %s\n", gcommGetLastError());
    return 1;
  }
  if (port_file != NULL) {
    FILE* f = fopen(port_file, "w");
    if (f == NULL || fprintf(f, "%d\n", bound) < 0 || fclose(f) != 0) {
      fprintf(stderr, "gradcomm-store: cannot write the port to %s\n", port_file);
      gcommStoreServerStop(server);
      return 1;
    }
  }
  printf("gradcomm-store listening on %s:%d\n", host, bound);
  fflush(stdout);
  sigwait(&stop_signals, &signal_number);
  fprintf(stderr, "gradcomm-store: %s received, stopping\n", signal_number == SIGINT ? "SIGINT" : "SIGTERM");
  gcommStoreServerStop(server);
  return 0;
}
