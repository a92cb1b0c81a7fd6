/* The smallest gradcomm program: include the header, link the library, print the
 * version, a status name and the environment. Built as strict C99 (-pedantic -Werror). */
#include <stdio.h>
#include <stdlib.h>

#include <gradcomm/gradcomm.h>

int main(void) {
  int version = 0;
  size_t required = 0;
  char* report;
  gcommStatus_t status = gcommGetVersion(&version);
  if (status != gcommSuccess) {
    fprintf(stderr, "%s (%s)\n", gcommGetLastError(), gcommGetStatusName(status));
    return 1;
  }
  printf("gradcomm %s (code %d, header %d)\n", gcommGetVersionString(), version, GCOMM_VERSION_CODE);
  printf("status %d is %s: %s\n", (int)gcommTimeout, gcommGetStatusName(gcommTimeout),
         gcommGetStatusString(gcommTimeout));

  /* Bad input gets a status and a message, never a crash. */
  status = gcommGetVersion(NULL);
  printf("refused: %s (%s)\n", gcommGetLastError(), gcommGetStatusName(status));

  /* Size query, then the report. */
  if (gcommGetEnvironmentReport(NULL, 0, &required) != gcommSuccess) return 1;
  report = (char*)malloc(required);
  if (report == NULL) return 1;
  if (gcommGetEnvironmentReport(report, required, NULL) != gcommSuccess) return 1;
  fputs(report, stdout);
  free(report);
  return version == GCOMM_VERSION_CODE ? 0 : 1;
}
