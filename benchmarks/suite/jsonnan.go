package suite

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
)

// Steady marks unmeasured figures with NaN, which JSON cannot carry; in
// results.json they are null, and null reads back as NaN.

type steadyFields Steady

// MarshalJSON writes NaN and ±Inf as null.
func (s Steady) MarshalJSON() ([]byte, error) {
	v := reflect.ValueOf(steadyFields(s))
	m := make(map[string]any, v.NumField())
	for i := range v.NumField() {
		f := v.Field(i)
		name := v.Type().Field(i).Name
		if f.Kind() == reflect.Float64 && (math.IsNaN(f.Float()) || math.IsInf(f.Float(), 0)) {
			m[name] = nil
			continue
		}
		m[name] = f.Interface()
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads null floats as NaN.
func (s *Steady) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("decode steady figures: %w", err)
	}
	var out steadyFields
	v := reflect.ValueOf(&out).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		msg, ok := raw[v.Type().Field(i).Name]
		if f.Kind() == reflect.Float64 && (!ok || string(msg) == "null") {
			f.SetFloat(math.NaN())
			continue
		}
		if !ok {
			continue
		}
		if err := json.Unmarshal(msg, f.Addr().Interface()); err != nil {
			return fmt.Errorf("decode steady figure %s: %w", v.Type().Field(i).Name, err)
		}
	}
	*s = Steady(out)
	return nil
}
