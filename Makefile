# Thin wrapper over the two README commands and the sanitizer run.
.PHONY: run test asan

run:
	./scripts/setup && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2 && ./build/kiln train --dataset mnist

test:
	./scripts/setup && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2 && ctest --test-dir build --output-on-failure

asan:
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE=ON && cmake --build build-asan -j2 && ctest --test-dir build-asan --output-on-failure -LE slow
