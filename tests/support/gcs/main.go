// Command tarn-fake-gcs is fake-gcs-server with the XML API that object_store speaks.
//
// fake-gcs-server (github.com/fsouza/fake-gcs-server) implements Cloud Storage's JSON
// API: objects, generations, `ifGenerationMatch` preconditions checked under its
// store's lock, listings from an offset. object_store speaks the XML API, which
// fake-gcs-server routes only in part and not faithfully: a path-style PUT needs an
// `uploadType` and never reads `x-goog-if-generation-match`, the XML listing ignores
// `start-after` and `continuation-token`, and there is no XML multipart upload
// (fsouza/fake-gcs-server#331 and #852; the XML support of #1164 is unmerged). This program runs fake-gcs-server in-process and turns each XML request
// object_store sends into the JSON request with the same meaning, handled by
// fake-gcs-server's own handler:
//
//   - PUT object (with `x-goog-if-generation-match`)  -> media upload (`ifGenerationMatch`)
//   - GET / HEAD object (ranges, generation)           -> download (read preconditions: 501)
//   - DELETE object                                    -> delete
//   - GET bucket `list-type=2`                         -> list (`startOffset`, pages)
//   - PUT object with `x-goog-copy-source`             -> download, then upload (precondition kept)
//   - XML multipart upload (initiate, parts, complete) -> parts held here, one upload at completion
//
// Every precondition is decided by fake-gcs-server, never here.
package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/fsouza/fake-gcs-server/fakestorage"
)

func main() {
	port := flag.Int("port", 4443, "port to listen on, on 127.0.0.1")
	flag.Parse()
	addr := fmt.Sprintf("127.0.0.1:%d", *port)
	server, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme:     "http",
		Host:       "127.0.0.1",
		Port:       uint16(*port),
		PublicHost: addr,
		NoListener: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	front := &front{inner: server.HTTPHandler(), uploads: map[string]map[int][]byte{}}
	log.Printf("tarn-fake-gcs listening on http://%s", addr)
	log.Fatal(http.ListenAndServe(addr, front))
}

type front struct {
	inner   http.Handler
	mu      sync.Mutex
	uploads map[string]map[int][]byte
	nextID  int
}

// call sends a JSON API request to fake-gcs-server and returns its recorded answer.
func (f *front) call(method, target string, body []byte, header http.Header) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, bytes.NewReader(body))
	for name, values := range header {
		req.Header[name] = values
	}
	rec := httptest.NewRecorder()
	f.inner.ServeHTTP(rec, req)
	return rec
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	for _, api := range []string{"/storage/v1/", "/upload/", "/download/", "/_internal/"} {
		if strings.HasPrefix(path, api) {
			f.inner.ServeHTTP(w, r)
			return
		}
	}
	bucket, object, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	bucket, _ = url.PathUnescape(bucket)
	object, err := url.PathUnescape(object)
	if err != nil || bucket == "" {
		http.Error(w, "bad path", http.StatusBadRequest)
		return
	}
	query := r.URL.Query()
	switch {
	case object == "" && r.Method == http.MethodGet:
		f.list(w, bucket, query)
	case object == "":
		http.Error(w, "unsupported bucket request", http.StatusNotImplemented)
	case r.Method == http.MethodPost && query.Has("uploads"):
		f.initiate(w, bucket, object)
	case r.Method == http.MethodPut && query.Has("uploadId"):
		f.part(w, r, query)
	case r.Method == http.MethodPost && query.Has("uploadId"):
		f.complete(w, r, bucket, object, query.Get("uploadId"))
	case r.Method == http.MethodDelete && query.Has("uploadId"):
		f.mu.Lock()
		delete(f.uploads, query.Get("uploadId"))
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPut && r.Header.Get("x-goog-copy-source") != "":
		f.copy(w, r, bucket, object)
	case r.Method == http.MethodPut:
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.upload(w, bucket, object, body, r.Header.Get("x-goog-if-generation-match"), r.Header.Get("Content-Type"))
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		// fake-gcs-server's download checks no read precondition: refuse rather than
		// answer as if one held.
		for _, h := range []string{"If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since"} {
			if r.Header.Get(h) != "" {
				http.Error(w, h+" is not supported by this fake", http.StatusNotImplemented)
				return
			}
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/download/storage/v1/b/" + bucket + "/o/" + object
		r2.URL.RawPath = "/download/storage/v1/b/" + url.PathEscape(bucket) + "/o/" + url.PathEscape(object)
		r2.URL.RawQuery = "alt=media"
		if g := query.Get("generation"); g != "" {
			r2.URL.RawQuery += "&generation=" + url.QueryEscape(g)
		}
		r2.RequestURI = r2.URL.RequestURI()
		f.inner.ServeHTTP(w, r2)
	case r.Method == http.MethodDelete:
		rec := f.call(http.MethodDelete, "/storage/v1/b/"+url.PathEscape(bucket)+"/o/"+url.PathEscape(object), nil, nil)
		w.WriteHeader(rec.Code)
	default:
		http.Error(w, "unsupported request", http.StatusNotImplemented)
	}
}

type objectJSON struct {
	Name       string `json:"name"`
	Size       string `json:"size"`
	Etag       string `json:"etag"`
	Updated    string `json:"updated"`
	Generation string `json:"generation"`
}

// upload stores body as bucket/object through a media upload, with the precondition given.
func (f *front) upload(w http.ResponseWriter, bucket, object string, body []byte, match, contentType string) {
	target := "/upload/storage/v1/b/" + url.PathEscape(bucket) + "/o?uploadType=media&name=" + url.QueryEscape(object)
	if match != "" {
		target += "&ifGenerationMatch=" + url.QueryEscape(match)
	}
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	rec := f.call(http.MethodPost, target, body, http.Header{"Content-Type": {contentType}})
	if rec.Code != http.StatusOK {
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		return
	}
	var obj objectJSON
	if err := json.Unmarshal(rec.Body.Bytes(), &obj); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("ETag", strconv.Quote(obj.Etag))
	w.Header().Set("x-goog-generation", obj.Generation)
	w.WriteHeader(http.StatusOK)
}

func (f *front) copy(w http.ResponseWriter, r *http.Request, bucket, object string) {
	source, err := url.PathUnescape(strings.TrimPrefix(r.Header.Get("x-goog-copy-source"), "/"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	srcBucket, srcObject, _ := strings.Cut(source, "/")
	rec := f.call(http.MethodGet, "/download/storage/v1/b/"+url.PathEscape(srcBucket)+"/o/"+url.PathEscape(srcObject)+"?alt=media", nil, nil)
	if rec.Code != http.StatusOK {
		w.WriteHeader(rec.Code)
		return
	}
	f.upload(w, bucket, object, rec.Body.Bytes(), r.Header.Get("x-goog-if-generation-match"), rec.Header().Get("Content-Type"))
}

func (f *front) initiate(w http.ResponseWriter, bucket, object string) {
	f.mu.Lock()
	f.nextID++
	id := fmt.Sprintf("upload-%d", f.nextID)
	f.uploads[id] = map[int][]byte{}
	f.mu.Unlock()
	writeXML(w, struct {
		XMLName  xml.Name `xml:"InitiateMultipartUploadResult"`
		Bucket   string
		Key      string
		UploadId string
	}{Bucket: bucket, Key: object, UploadId: id})
}

func (f *front) part(w http.ResponseWriter, r *http.Request, query url.Values) {
	number, err := strconv.Atoi(query.Get("partNumber"))
	if err != nil {
		http.Error(w, "bad partNumber", http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	parts, ok := f.uploads[query.Get("uploadId")]
	if ok {
		parts[number] = body
	}
	f.mu.Unlock()
	if !ok {
		http.Error(w, "no such upload", http.StatusNotFound)
		return
	}
	w.Header().Set("ETag", strconv.Quote(fmt.Sprintf("part-%d-%d", number, len(body))))
	w.WriteHeader(http.StatusOK)
}

func (f *front) complete(w http.ResponseWriter, r *http.Request, bucket, object, id string) {
	var request struct {
		Parts []struct {
			PartNumber int
		} `xml:"Part"`
	}
	if err := xml.NewDecoder(r.Body).Decode(&request); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	parts, ok := f.uploads[id]
	delete(f.uploads, id)
	f.mu.Unlock()
	if !ok {
		http.Error(w, "no such upload", http.StatusNotFound)
		return
	}
	numbers := make([]int, 0, len(request.Parts))
	for _, p := range request.Parts {
		numbers = append(numbers, p.PartNumber)
	}
	sort.Ints(numbers)
	var body bytes.Buffer
	for _, n := range numbers {
		part, ok := parts[n]
		if !ok {
			http.Error(w, fmt.Sprintf("part %d was never uploaded", n), http.StatusBadRequest)
			return
		}
		body.Write(part)
	}
	rec := httptest.NewRecorder()
	f.upload(rec, bucket, object, body.Bytes(), "", "")
	if rec.Code != http.StatusOK {
		w.WriteHeader(rec.Code)
		return
	}
	w.Header().Set("x-goog-generation", rec.Header().Get("x-goog-generation"))
	writeXML(w, struct {
		XMLName xml.Name `xml:"CompleteMultipartUploadResult"`
		Bucket  string
		Key     string
		ETag    string
	}{Bucket: bucket, Key: object, ETag: rec.Header().Get("ETag")})
}

func (f *front) list(w http.ResponseWriter, bucket string, query url.Values) {
	params := url.Values{}
	for xmlName, jsonName := range map[string]string{
		"prefix": "prefix", "delimiter": "delimiter", "continuation-token": "pageToken",
		"max-keys": "maxResults", "start-after": "startOffset",
	} {
		if v := query.Get(xmlName); v != "" {
			params.Set(jsonName, v)
		}
	}
	rec := f.call(http.MethodGet, "/storage/v1/b/"+url.PathEscape(bucket)+"/o?"+params.Encode(), nil, nil)
	if rec.Code != http.StatusOK {
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		return
	}
	var listed struct {
		Items         []objectJSON `json:"items"`
		Prefixes      []string     `json:"prefixes"`
		NextPageToken string       `json:"nextPageToken"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &listed); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	type contents struct {
		Key          string
		Size         string
		LastModified string
		ETag         string
	}
	type commonPrefix struct{ Prefix string }
	out := struct {
		XMLName               xml.Name `xml:"ListBucketResult"`
		Name                  string
		Prefix                string
		Contents              []contents
		CommonPrefixes        []commonPrefix
		NextContinuationToken string `xml:",omitempty"`
	}{Name: bucket, Prefix: query.Get("prefix"), NextContinuationToken: listed.NextPageToken}
	after := query.Get("start-after")
	for _, item := range listed.Items {
		// startOffset includes its own name; start-after does not.
		if after != "" && item.Name <= after {
			continue
		}
		out.Contents = append(out.Contents, contents{item.Name, item.Size, item.Updated, strconv.Quote(item.Etag)})
	}
	for _, prefix := range listed.Prefixes {
		out.CommonPrefixes = append(out.CommonPrefixes, commonPrefix{prefix})
	}
	writeXML(w, out)
}

func writeXML(w http.ResponseWriter, value any) {
	body, err := xml.Marshal(value)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(body)
}
