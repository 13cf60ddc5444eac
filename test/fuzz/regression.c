/*
 * flame_profd — runs the fuzz target over every file in the stored
 * corpus, as a plain test in the normal suite (no libFuzzer needed).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
main(int argc, char **argv)
{
	size_t files = 0;

	for (int a = 1; a < argc; a++) {
		DIR *dir = opendir(argv[a]);
		struct dirent *de;

		if (!dir) {
			perror(argv[a]);
			return 1;
		}
		while ((de = readdir(dir))) {
			char path[4096];
			unsigned char *data;
			long len;
			FILE *f;

			if (de->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", argv[a], de->d_name);
			f = fopen(path, "rb");
			if (!f)
				continue;
			fseek(f, 0, SEEK_END);
			len = ftell(f);
			fseek(f, 0, SEEK_SET);
			data = malloc(len > 0 ? (size_t)len : 1);
			if (len > 0 && fread(data, 1, (size_t)len, f) != (size_t)len)
				len = 0;
			fclose(f);
			LLVMFuzzerTestOneInput(data, (size_t)(len > 0 ? len : 0));
			free(data);
			files++;
		}
		closedir(dir);
	}
	printf("%zu corpus files, 0 crashes\n", files);
	return files ? 0 : 1;
}
