/* gradcomm-info: what gradcomm sees on this machine (CUDA runtime and driver,
 * NCCL built and loaded, GPUs). Uses only the public C API. */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include <gradcomm/gradcomm.h>

typedef gcommStatus_t (*ReportFn)(char*, size_t, size_t*);

static void usage(FILE* out) {
  fputs(
      "Usage: gradcomm-info [--json] [--version] [--help]\n"
      "What gradcomm sees on this machine: its version, the CUDA runtime and driver,\n"
      "the NCCL it was built against and the one it loads (and where from), the GPUs.\n"
      "  -j, --json     the same facts as one JSON object\n"
      "  -V, --version  gradcomm's version only\n"
      "  -h, --help     this text\n",
      out);
}

static int print_report(ReportFn report) {
  size_t required = 0;
  char* text;
  if (report(NULL, 0, &required) != gcommSuccess) {
    fprintf(stderr, "gradcomm-info: %s\n", gcommGetLastError());
    return 1;
  }
  text = (char*)malloc(required);
  if (text == NULL || report(text, required, NULL) != gcommSuccess) {
    fprintf(stderr, "gradcomm-info: %s\n", text == NULL ? "out of memory" : gcommGetLastError());
    free(text);
    return 1;
  }
  fputs(text, stdout);
  free(text);
  return 0;
}

int main(int argc, char** argv) {
  static const struct option options[] = {{"json", no_argument, NULL, 'j'},
                                          {"version", no_argument, NULL, 'V'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  int json = 0, c;
  while ((c = getopt_long(argc, argv, "jVh", options, NULL)) != -1) {
    switch (c) {
      case 'j':
        json = 1;
        break;
      case 'V':
        printf("gradcomm-info %s\n", gcommGetVersionString());
        return 0;
      case 'h':
        usage(stdout);
        return 0;
      default:
        usage(stderr);
        return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "gradcomm-info: unexpected argument '%s'\n", argv[optind]);
    usage(stderr);
    return 2;
  }
  return print_report(json ? gcommGetEnvironmentJson : gcommGetEnvironmentReport);
}
