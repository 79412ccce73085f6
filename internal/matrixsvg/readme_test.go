package matrixsvg

import (
	"bytes"
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/images/zone-matrix.svg from the renderer")

// readmePicture is the matrix picture the README and docs/operating.md show:
// a zone of five whose edge-a-5 died.
const readmePicture = "../../docs/images/zone-matrix.svg"

// TestReadmePictureIsTheRenderers: the picture in the docs is what the
// renderer draws today, not an old drawing (go test -update redraws it).
func TestReadmePictureIsTheRenderers(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, testView("edge-a-1", "edge-a-2", "edge-a-3", "edge-a-4", "edge-a-5")); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(readmePicture, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(readmePicture)
	if err != nil {
		t.Fatalf("%v (go test ./internal/matrixsvg -update writes it)", err)
	}
	if !bytes.Equal(got, b.Bytes()) {
		t.Errorf("%s is not what the renderer draws; go test ./internal/matrixsvg -run TestReadmePicture -update", readmePicture)
	}
}
